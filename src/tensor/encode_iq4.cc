// Encoders of the non-linear 4-bit types IQ4_NL and IQ4_XS (gguf.quants can
// only decode them): a weighted scale search over the grid kIq4Values per
// group of 32, and every code re-picked for the scale as stored, so the error
// measured is the error a reader gets.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "tensor/quant_blocks.h"
#include "tensor/weighted_encoders.h"

namespace folio {
namespace {

constexpr int kGroups = kSuperBlockElems / kBlockElems;  // IQ4_XS's groups of 32
constexpr int kCodeOfZero = 8;                           // kIq4Values[8] = 1: a zero scale decodes it to +0

// The code whose grid value is nearest to v (in units of the scale); a v
// exactly halfway goes to the larger value. v must not be NaN. The grid's
// midpoints are multiples of 1/2, so one table entry per half-unit cell
// [k / 2, (k + 1) / 2) holds that cell's code.
constexpr int kCellsBelowZero = 2 * 140;  // cells from v = -140 to v = 140: beyond the grid's ends
struct NearestCodeTable {
  std::uint8_t code[2 * kCellsBelowZero];
  constexpr NearestCodeTable() : code() {
    for (int k = 0; k < 2 * kCellsBelowZero; ++k) {
      const double center = (k - kCellsBelowZero + 0.5) / 2.0;
      int best = 0;
      for (int q = 1; q < 16; ++q) {
        const double d = center - kIq4Values[q], best_d = center - kIq4Values[best];
        if (d * d < best_d * best_d) best = q;
      }
      code[k] = static_cast<std::uint8_t>(best);
    }
  }
};
constexpr NearestCodeTable kNearestCode;

int nearest_iq4(double v) {
  const double clamped = std::clamp(v, -140.0, 139.75);
  return kNearestCode.code[static_cast<int>(std::floor(2.0 * clamped)) + kCellsBelowZero];
}

// sum w (x - scale * value(q))^2 with q the nearest codes for `scale`,
// written to q. A zero scale decodes every code to zero.
double group_error(const float* x, const float* w, double scale, int* q) {
  double error = 0.0;
  for (int j = 0; j < kBlockElems; ++j) {
    q[j] = scale == 0.0 ? kCodeOfZero : nearest_iq4(static_cast<double>(x[j]) / scale);
    const double diff = static_cast<double>(x[j]) - scale * kIq4Values[q[j]];
    error += static_cast<double>(w[j]) * diff * diff;
  }
  return error;
}

// The codes nearest to x / scale (given as its inverse) and the weighted
// least-squares scale for them: s = sum w x v / sum w v^2, whose error is
// sum w x^2 - s * sum w x v. Returns that error; s in *fitted.
double fit_codes(const float* x, const float* w, double inverse, double wxx, double* fitted) {
  double wxv = 0.0, wvv = 0.0;
  for (int j = 0; j < kBlockElems; ++j) {
    const double v = kIq4Values[nearest_iq4(static_cast<double>(x[j]) * inverse)];
    wxv += static_cast<double>(w[j]) * x[j] * v;
    wvv += static_cast<double>(w[j]) * v * v;
  }
  if (!(wvv > 0.0)) return std::numeric_limits<double>::infinity();
  *fitted = wxv / wvv;
  return wxx - *fitted * wxv;
}

// The scale of one group of 32 with the least weighted error found: starting
// scales put the largest-magnitude element at or near either end of the grid
// (-127 or 113), each picks its codes and the scale is refitted to them in
// closed form; the best is refined by re-picking codes for it until that
// stops helping. 0 for an all-zero group. In double: finite floats neither
// overflow nor vanish there.
double fit_group(const float* x, const float* w) {
  double extreme = 0.0, wxx = 0.0;
  for (int j = 0; j < kBlockElems; ++j) {
    if (std::fabs(x[j]) > std::fabs(extreme)) extreme = x[j];
    wxx += static_cast<double>(w[j]) * x[j] * x[j];
  }
  if (extreme == 0.0) return 0.0;
  double best_scale = 0.0, best_error = std::numeric_limits<double>::infinity();
  auto consider = [&](double inverse) {
    double fitted = 0.0;
    const double error = fit_codes(x, w, inverse, wxx, &fitted);
    if (error < best_error && fitted != 0.0) {
      best_error = error;
      best_scale = fitted;
      return true;
    }
    return false;
  };
  constexpr int kSteps = 6;
  for (const double end : {static_cast<double>(kIq4Values[0]), static_cast<double>(kIq4Values[15])})
    for (int s = -kSteps; s <= kSteps / 2; ++s)
      // The extreme element from 6/48 of the range inside the end to 3/48 outside.
      consider(end * (1.0 + static_cast<double>(s) / 48.0) / extreme);
  for (int round = 0; round < 2 && best_scale != 0.0; ++round)
    if (!consider(1.0 / best_scale)) break;
  if (best_scale == 0.0) best_scale = extreme / static_cast<double>(kIq4Values[0]);
  return best_scale;
}

void pack_iq4(const int* q, std::uint8_t* qs) {
  for (int j = 0; j < kBlockElems / 2; ++j) qs[j] = static_cast<std::uint8_t>(q[j] | (q[j + kBlockElems / 2] << 4));
}

// Throws for a NaN or infinity among count elements: no scale encodes them.
void check_finite(const float* x, int count, std::int64_t first, const char* type) {
  for (int j = 0; j < count; ++j)
    if (!std::isfinite(x[j]))
      fail("cannot quantize to {}: element {} of the row is {}; {} encodes finite numbers only", type, first + j, x[j],
           type);
}

}  // namespace

// Without importance every element weighs the same: the plain squared error.
void encode_iq4_nl(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems) {
    check_finite(x, kBlockElems, i * kBlockElems, "iq4_nl");
    float w[kBlockElems];
    block_weights(importance == nullptr ? nullptr : importance + i * kBlockElems, kBlockElems, w);
    BlockIQ4_NL block{};
    block.d = f32_to_f16_saturated(static_cast<float>(fit_group(x, w)));
    int q[kBlockElems];
    group_error(x, w, f16_to_f32(block.d), q);
    pack_iq4(q, block.qs);
    store_block(dst, i, block);
  }
}

// Each group's scale is fitted as for IQ4_NL, then all eight are coded as
// d * (l - 32), l in [0, 63]: d puts the largest-magnitude group scale on -32
// (or a little inside, if that lowers the block's error), and every group's l
// and codes are re-picked for d as stored.
void encode_iq4_xs(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kSuperBlockElems) {
    check_finite(x, kSuperBlockElems, i * kSuperBlockElems, "iq4_xs");
    float w[kSuperBlockElems];
    block_weights(importance == nullptr ? nullptr : importance + i * kSuperBlockElems, kSuperBlockElems, w);
    double scales[kGroups];
    double extreme = 0.0;
    for (int g = 0; g < kGroups; ++g) {
      scales[g] = fit_group(x + kBlockElems * g, w + kBlockElems * g);
      if (std::fabs(scales[g]) > std::fabs(extreme)) extreme = scales[g];
    }
    BlockIQ4_XS best{};
    best.scales_h = 0xaaaa;  // l = 32 (low nibbles 0, high bits 2) in every group: zero scales
    for (int g = 0; g < kGroups; ++g) std::memset(best.qs + 16 * g, kCodeOfZero * 0x11, 16);
    if (extreme != 0.0) {
      double best_error = std::numeric_limits<double>::infinity();
      for (const double shrink : {1.0, 31.0 / 32.0, 30.0 / 32.0, 33.0 / 32.0}) {
        BlockIQ4_XS block{};
        block.d = f32_to_f16_saturated(static_cast<float>(extreme / (-32.0 * shrink)));
        const float d = f16_to_f32(block.d);
        double error = 0.0;
        for (int g = 0; g < kGroups; ++g) {
          int l = 32;
          if (d != 0.0f) l = static_cast<int>(std::lround(std::clamp(scales[g] / d, -32.0, 31.0))) + 32;
          block.scales_l[g / 2] = static_cast<std::uint8_t>(block.scales_l[g / 2] | ((l & 0x0f) << (4 * (g % 2))));
          block.scales_h = static_cast<std::uint16_t>(block.scales_h | ((l >> 4) << (2 * g)));
          const float scale = d * static_cast<float>(l - 32);  // as the decoder forms it
          int q[kBlockElems];
          error += group_error(x + kBlockElems * g, w + kBlockElems * g, scale, q);
          pack_iq4(q, block.qs + 16 * g);
        }
        if (error < best_error) {
          best_error = error;
          best = block;
        }
      }
    }
    store_block(dst, i, best);
  }
}

}  // namespace folio
