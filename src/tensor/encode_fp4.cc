// Encoders of the FP4 (E2M1) types: MXFP4 byte for byte as gguf.quants
// writes it (and, given importance, the best of its scale's neighbours), and
// NVFP4, which gguf cannot encode, by a search over each group's E4M3 scale.
// Codes are always the nearest grid value for the scale as stored.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "tensor/quant_blocks.h"
#include "tensor/weighted_encoders.h"

// Bit-exactness with gguf needs every multiply and add rounded on its own.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace folio {
namespace {

// gguf's argmin over the grid of |d * value - x| in float: the first code of
// least error, or the first whose error is NaN (numpy's argmin takes NaN as
// the least), so a NaN or infinite x gets code 0.
int nearest_fp4(float d, float x) {
  int best = 0;
  float best_error = std::numeric_limits<float>::infinity();
  for (int q = 0; q < 16; ++q) {
    const float error = std::fabs(d * static_cast<float>(kFp4Values[q]) - x);
    if (std::isnan(error)) return q;
    if (error < best_error) {
      best_error = error;
      best = q;
    }
  }
  return best;
}

// sum w (x - d * value(q))^2 over count elements with their nearest codes,
// written to q.
double fp4_error(const float* x, const float* w, int count, float d, int* q) {
  double error = 0.0;
  for (int j = 0; j < count; ++j) {
    q[j] = nearest_fp4(d, x[j]);
    const double diff = static_cast<double>(x[j]) - static_cast<double>(d) * kFp4Values[q[j]];
    error += static_cast<double>(w[j]) * diff * diff;
  }
  return error;
}

// gguf's scale byte: floor(log2(amax)) - 2 + 127, so that amax / d is in
// [8, 16) (amax lands on the grid's top value 12 or is clipped to it). NaN
// amax (numpy's max propagates it) and 0 give 0. Where gguf's cast to uint8
// is undefined, folio saturates: an infinity gives 255, an amax below 2^-125
// gives 0. log2f is the C library's; numpy's float32 log2 may round
// differently for an amax within a few ulps below a power of two.
std::uint8_t mxfp4_exponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  const float e = std::floor(std::log2(amax)) - 2.0f + 127.0f;
  if (!(e >= 0.0f)) return 0;
  if (e > 255.0f) return 255;
  return static_cast<std::uint8_t>(e);
}

void pack_fp4(const int* q, std::uint8_t* qs) {
  for (int j = 0; j < kBlockElems / 2; ++j) qs[j] = static_cast<std::uint8_t>(q[j] | (q[j + kBlockElems / 2] << 4));
}

BlockMXFP4 mxfp4_block(const float* x, std::uint8_t e) {
  BlockMXFP4 block{};
  block.e = e;
  const float d = e8m0_half_to_f32(e);
  int q[kBlockElems];
  for (int j = 0; j < kBlockElems; ++j) q[j] = nearest_fp4(d, x[j]);
  pack_fp4(q, block.qs);
  return block;
}

// numpy's abs(x).max(): NaN if any element is.
float amax_of(const float* x, int count) {
  float amax = 0.0f;
  for (int j = 0; j < count; ++j) {
    if (std::isnan(x[j])) return std::fabs(x[j]);
    amax = std::fmax(amax, std::fabs(x[j]));
  }
  return amax;
}

// E4M3 scale codes 1 .. 0x7e in increasing order of value (0x7f is NaN).
constexpr int kMaxUe4m3 = 0x7e;

// The code whose value ue4m3_half_to_f32 is nearest to v (v >= 0), saturating.
int nearest_ue4m3_half(float v) {
  int lo = 1, hi = kMaxUe4m3;
  while (lo < hi) {  // the first code whose value is >= v
    const int mid = (lo + hi) / 2;
    if (ue4m3_half_to_f32(static_cast<std::uint8_t>(mid)) < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo > 1 &&
      v - ue4m3_half_to_f32(static_cast<std::uint8_t>(lo - 1)) <= ue4m3_half_to_f32(static_cast<std::uint8_t>(lo)) - v)
    return lo - 1;
  return lo;
}

}  // namespace

void encode_mxfp4(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems)
    store_block(dst, i, mxfp4_block(x, mxfp4_exponent(amax_of(x, kBlockElems))));
}

// With importance, per block the best of gguf's exponent and its two
// neighbours by weighted error (gguf's on a tie); blocks holding a NaN or an
// infinity keep gguf's bytes.
void encode_weighted_mxfp4(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_mxfp4(x, dst, num_blocks);
  if (importance == nullptr) return;
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems, importance += kBlockElems) {
    const float amax = amax_of(x, kBlockElems);
    if (!std::isfinite(amax) || amax == 0.0f) continue;
    float w[kBlockElems];
    block_weights(importance, kBlockElems, w);
    const int e = mxfp4_exponent(amax);
    int q[kBlockElems];
    double best_error = fp4_error(x, w, kBlockElems, e8m0_half_to_f32(static_cast<std::uint8_t>(e)), q);
    int best = e;
    for (const int candidate : {e - 1, e + 1}) {
      if (candidate < 0 || candidate > 255) continue;
      const double error = fp4_error(x, w, kBlockElems, e8m0_half_to_f32(static_cast<std::uint8_t>(candidate)), q);
      if (error < best_error) {
        best_error = error;
        best = candidate;
      }
    }
    if (best != e) store_block(dst, i, mxfp4_block(x, static_cast<std::uint8_t>(best)));
  }
}

// Per group of 16: the E4M3 scale nearest amax / 6 (the grid's top, 12 halved)
// and its neighbours, and the zero scale, each with its nearest codes; the one
// of least weighted error is kept (the nearest on a tie). Without importance
// every element weighs the same.
void encode_nvfp4(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  constexpr int kGroups = kNvfp4Elems / kNvfp4GroupElems;
  constexpr int kHalfGroup = kNvfp4GroupElems / 2;
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kNvfp4Elems) {
    for (int j = 0; j < kNvfp4Elems; ++j)
      if (!std::isfinite(x[j]))
        fail("cannot quantize to nvfp4: element {} of the row is {}; nvfp4 encodes finite numbers only",
             i * kNvfp4Elems + j, x[j]);
    float w[kNvfp4Elems];
    block_weights(importance == nullptr ? nullptr : importance + i * kNvfp4Elems, kNvfp4Elems, w);
    BlockNVFP4 block{};
    for (int g = 0; g < kGroups; ++g) {
      const float* xg = x + kNvfp4GroupElems * g;
      const float* wg = w + kNvfp4GroupElems * g;
      const float amax = amax_of(xg, kNvfp4GroupElems);
      int q[kNvfp4GroupElems] = {};
      int best = 0;
      if (amax > 0.0f) {
        const int nearest = nearest_ue4m3_half(amax / 6.0f);
        double best_error = std::numeric_limits<double>::infinity();
        for (const int c : {nearest, nearest - 1, nearest + 1, nearest - 2, nearest + 2, 0}) {
          if (c < 0 || c > kMaxUe4m3 || (c == 0 && best_error == 0.0)) continue;
          int cq[kNvfp4GroupElems];
          const double error = fp4_error(xg, wg, kNvfp4GroupElems, ue4m3_half_to_f32(static_cast<std::uint8_t>(c)), cq);
          if (error < best_error) {
            best_error = error;
            best = c;
            std::memcpy(q, cq, sizeof(q));
          }
        }
      }
      block.d[g] = static_cast<std::uint8_t>(best);
      for (int j = 0; j < kHalfGroup; ++j)
        block.qs[kHalfGroup * g + j] = static_cast<std::uint8_t>(q[j] | (q[j + kHalfGroup] << 4));
    }
    store_block(dst, i, block);
  }
}

}  // namespace folio
