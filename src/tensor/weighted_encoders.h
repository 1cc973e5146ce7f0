// The encoders that search each block's scales for the least importance-
// weighted error (K-quants always, the 32-element types when given
// importance), and the helpers they share. quantize.cc dispatches to them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tensor/half.h"

namespace folio {

// Encodes num_blocks blocks from x. importance holds one non-negative finite
// float per element, or is nullptr (see each encoder for what that means).
using WeightedEncodeFn = void (*)(const float* x, const float* importance, void* dst, std::int64_t num_blocks);

void encode_q2_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_q3_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_q4_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_q5_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_q6_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks);

void encode_weighted_q4_0(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_weighted_q4_1(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_weighted_q5_0(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_weighted_q5_1(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_weighted_q8_0(const float* x, const float* importance, void* dst, std::int64_t num_blocks);

// The 4-bit grid types: IQ4_NL, IQ4_XS and NVFP4 always search (gguf cannot
// encode them); MXFP4 is gguf's encoder (encode_mxfp4), and with importance
// the best of its scale and the scale's neighbours.
void encode_iq4_nl(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_iq4_xs(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_nvfp4(const float* x, const float* importance, void* dst, std::int64_t num_blocks);
void encode_mxfp4(const float* x, void* dst, std::int64_t num_blocks);
void encode_weighted_mxfp4(const float* x, const float* importance, void* dst, std::int64_t num_blocks);

// A block's values rescaled by a power of two so that the largest magnitude is
// in [0.5, 1): squares and sums then neither overflow nor vanish, and since the
// rescaling is exact (short of float subnormals) every fit carries over.
struct Normalized {
  int exponent = 0;  // x = normalized * 2^exponent
  float to_normalized(float v) const { return v * down_high_ * down_low_; }
  float to_real(float v) const { return std::ldexp(v, exponent); }

  static Normalized of(float amax) {
    Normalized n;
    std::frexp(amax, &n.exponent);
    // 2^-exponent may be beyond float (amax subnormal), so in two factors.
    n.down_high_ = std::ldexp(1.0f, -n.exponent / 2);
    n.down_low_ = std::ldexp(1.0f, -n.exponent - (-n.exponent / 2));
    return n;
  }

 private:
  float down_high_ = 1.0f;
  float down_low_ = 1.0f;
};

// float -> binary16, but a value beyond binary16's range becomes the largest
// finite one instead of infinity, so a block of huge values still decodes to
// finite (clipped) numbers.
inline std::uint16_t f32_to_f16_saturated(float v) {
  const std::uint16_t h = f32_to_f16(v);
  if ((h & 0x7fffu) == 0x7c00u) return static_cast<std::uint16_t>((h & 0x8000u) | 0x7bffu);
  return h;
}

// The weights a block's search minimises: importance scaled so that the
// block's largest is 1 (the best encoding is the same; sums stay in range),
// or all ones where there is no importance or it is all zero.
inline void block_weights(const float* importance, int n, float* w) {
  const float max = importance == nullptr ? 0.0f : *std::max_element(importance, importance + n);
  for (int j = 0; j < n; ++j) w[j] = max > 0.0f ? importance[j] / max : 1.0f;
}

}  // namespace folio
