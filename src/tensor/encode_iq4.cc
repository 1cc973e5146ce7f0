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

// The code whose grid value is nearest to v (in units of the scale); halves
// go to the smaller value. v must not be NaN.
int nearest_iq4(double v) {
  int lo = 0, hi = 15;
  while (lo < hi) {  // the first code whose upper midpoint is >= v
    const int mid = (lo + hi) / 2;
    const double upper = 0.5 * (static_cast<double>(kIq4Values[mid]) + static_cast<double>(kIq4Values[mid + 1]));
    if (v <= upper) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
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

// The scale of one group of 32 with the least weighted error found: starting
// scales put the largest-magnitude element at or near either end of the grid
// (-127 or 113), each picks its codes, the scale is refitted to them in closed
// form (s = sum w x v / sum w v^2), and the best is refined by re-picking codes
// until that stops helping. 0 for an all-zero group. In double: finite floats
// neither overflow nor vanish there.
double fit_group(const float* x, const float* w) {
  double extreme = 0.0;
  for (int j = 0; j < kBlockElems; ++j)
    if (std::fabs(x[j]) > std::fabs(extreme)) extreme = x[j];
  if (extreme == 0.0) return 0.0;
  double best_scale = 0.0, best_error = std::numeric_limits<double>::infinity();
  int q[kBlockElems];
  auto refit = [&](double scale) {
    group_error(x, w, scale, q);
    double wxv = 0.0, wvv = 0.0;
    for (int j = 0; j < kBlockElems; ++j) {
      const double v = kIq4Values[q[j]];
      wxv += static_cast<double>(w[j]) * x[j] * v;
      wvv += static_cast<double>(w[j]) * v * v;
    }
    return wvv > 0.0 ? wxv / wvv : scale;
  };
  auto consider = [&](double scale) {
    const double error = group_error(x, w, scale, q);
    if (error < best_error) {
      best_error = error;
      best_scale = scale;
    }
  };
  constexpr int kSteps = 8;
  for (const double end : {static_cast<double>(kIq4Values[0]), static_cast<double>(kIq4Values[15])}) {
    for (int s = -kSteps; s <= kSteps / 2; ++s) {
      // The extreme element from 1/8 of the range inside the end to 1/16 outside.
      const double scale = extreme / (end * (1.0 + static_cast<double>(s) / 64.0));
      consider(scale);
      consider(refit(scale));
    }
  }
  for (int round = 0; round < 2; ++round) consider(refit(best_scale));
  return best_scale;
}

void pack_iq4(const int* q, std::uint8_t* qs) {
  for (int j = 0; j < kBlockElems / 2; ++j)
    qs[j] = static_cast<std::uint8_t>(q[j] | (q[j + kBlockElems / 2] << 4));
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
          if (d != 0.0f) l = std::clamp(static_cast<int>(std::lround(scales[g] / d)), -32, 31) + 32;
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
