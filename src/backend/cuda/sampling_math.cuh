// The sampling op's arithmetic, host and device alike: sampler_math's
// exponential and logit keys, RowSampler's ranking as one 64-bit key, and
// SamplingRng, each ported operation for operation so that weights, ranks and
// draws are the host's bits (tests/backend checks them without a GPU).
#pragma once

#include <cstdint>

#include "backend/cuda/number_formats.cuh"

namespace folio::cuda::sampling {

// sampler_math::softmax_exp: exp(x) for x in [-87, 0] (0 below, and for NaN).
__host__ __device__ __forceinline__ float softmax_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;
  const std::uint32_t xb = bits_of(x);
  const bool in_range = (xb >= 0x80000000u && xb <= 0xC2AE0000u) || xb == 0u;
  const float xc = in_range ? x : -87.0f;
  const float t = add_rn(mul_rn(xc, kLog2e), kRound);
  const float n = sub_rn(t, kRound);
  float r = sub_rn(xc, mul_rn(n, kLn2Hi));
  r = sub_rn(r, mul_rn(n, kLn2Lo));
  float p = 1.0f / 5040.0f;
  p = add_rn(mul_rn(p, r), 1.0f / 720.0f);
  p = add_rn(mul_rn(p, r), 1.0f / 120.0f);
  p = add_rn(mul_rn(p, r), 1.0f / 24.0f);
  p = add_rn(mul_rn(p, r), 1.0f / 6.0f);
  p = add_rn(mul_rn(p, r), 0.5f);
  p = add_rn(mul_rn(p, r), 1.0f);
  p = add_rn(mul_rn(p, r), 1.0f);
  const std::uint32_t two_n_bits = (bits_of(t) - bits_of(kRound) + 127u) << 23;
  return in_range ? mul_rn(p, float_of(two_n_bits)) : 0.0f;
}

__host__ __device__ __forceinline__ float softmax_weight(float logit, float max_logit, float temperature) {
  return softmax_exp(div_rn(sub_rn(logit, max_logit), temperature));
}

__host__ __device__ __forceinline__ bool is_positive_finite(float x) { return bits_of(x) - 1u < 0x7F7FFFFFu; }

// sampler_math::logit_key: ordered like the logit, NaN below everything.
__host__ __device__ __forceinline__ std::int32_t logit_key(float logit) {
  const std::uint32_t b = bits_of(logit);
  const auto s = static_cast<std::int32_t>(b);
  const std::int32_t key = s ^ ((s >> 31) & 0x7FFFFFFF);
  return (b & 0x7FFFFFFFu) <= 0x7F800000u ? key : static_cast<std::int32_t>(0x80000000u);
}
__host__ __device__ __forceinline__ float from_logit_key(std::int32_t key) {
  return float_of(static_cast<std::uint32_t>(key ^ ((key >> 31) & 0x7FFFFFFF)));
}

// RowSampler's ranking key: smaller ranks first. A logit ranks by its value
// as a float compares (NaN as -inf, -0 as +0), ties by the lower id.
__host__ __device__ __forceinline__ std::uint64_t rank_key(float logit, std::int64_t id) {
  float v = is_nan(logit) ? -INFINITY : logit;
  if (v == 0.0f) v = 0.0f;
  const std::uint32_t b = bits_of(v);
  const std::uint32_t ordered = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // ascending with v
  return (static_cast<std::uint64_t>(~ordered) << 32) | static_cast<std::uint32_t>(id);
}
__host__ __device__ __forceinline__ std::int32_t rank_id(std::uint64_t key) {
  return static_cast<std::int32_t>(key & 0xffffffffu);
}
__host__ __device__ __forceinline__ float rank_value(float logit) { return is_nan(logit) ? -INFINITY : logit; }

// SamplingRng: SplitMix64 and its uniform in [0, 1).
struct Rng {
  std::uint64_t state;
  __host__ __device__ double uniform() {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

}  // namespace folio::cuda::sampling
