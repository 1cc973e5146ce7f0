// Device pieces of the sampling op: sampler_math's exponential and logit
// keys and SamplingRng, ported operation for operation (so weights, lane sums
// and draws are the host's bits), and the block-wide tools one row needs:
// reductions, lane sums in sampler_math's fixed order, and a radix select
// plus bitonic sort that list a row's tokens in rank order chunk by chunk
// (most likely first, ties to the lower id), which top-k and top-p walk.
#pragma once

#include <cstdint>

#include "backend/cuda/device_math.cuh"

namespace folio::cuda::sampling {

inline constexpr int kThreads = 256;  // one block per row
inline constexpr int kChunk = 1024;   // tokens sorted at a time

// sampler_math::softmax_exp: exp(x) for x in [-87, 0] (0 below, and for NaN).
__device__ __forceinline__ float softmax_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;
  const std::uint32_t xb = __float_as_uint(x);
  const bool in_range = (xb >= 0x80000000u && xb <= 0xC2AE0000u) || xb == 0u;
  const float xc = in_range ? x : -87.0f;
  const float t = __fadd_rn(__fmul_rn(xc, kLog2e), kRound);
  const float n = __fsub_rn(t, kRound);
  float r = __fsub_rn(xc, __fmul_rn(n, kLn2Hi));
  r = __fsub_rn(r, __fmul_rn(n, kLn2Lo));
  float p = 1.0f / 5040.0f;
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 720.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 120.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 24.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 6.0f);
  p = __fadd_rn(__fmul_rn(p, r), 0.5f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  const std::uint32_t two_n_bits = (__float_as_uint(t) - __float_as_uint(kRound) + 127u) << 23;
  return in_range ? __fmul_rn(p, __uint_as_float(two_n_bits)) : 0.0f;
}

__device__ __forceinline__ float softmax_weight(float logit, float max_logit, float temperature) {
  return softmax_exp(__fdiv_rn(__fsub_rn(logit, max_logit), temperature));
}

__device__ __forceinline__ bool is_positive_finite(float x) { return __float_as_uint(x) - 1u < 0x7F7FFFFFu; }

// sampler_math::logit_key: ordered like the logit, NaN below everything.
__device__ __forceinline__ std::int32_t logit_key(float logit) {
  const std::uint32_t b = __float_as_uint(logit);
  const auto s = static_cast<std::int32_t>(b);
  const std::int32_t key = s ^ ((s >> 31) & 0x7FFFFFFF);
  return (b & 0x7FFFFFFFu) <= 0x7F800000u ? key : static_cast<std::int32_t>(0x80000000u);
}
__device__ __forceinline__ float from_logit_key(std::int32_t key) {
  return __uint_as_float(static_cast<std::uint32_t>(key ^ ((key >> 31) & 0x7FFFFFFF)));
}

// RowSampler's ranking key: smaller ranks first. A logit ranks by its value
// as a float compares (NaN as -inf, -0 as +0), ties by the lower id.
__device__ __forceinline__ std::uint64_t rank_key(float logit, std::int64_t id) {
  float v = isnan(logit) ? -INFINITY : logit;
  if (v == 0.0f) v = 0.0f;
  const std::uint32_t b = __float_as_uint(v);
  const std::uint32_t ordered = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // ascending with v
  return (static_cast<std::uint64_t>(~ordered) << 32) | static_cast<std::uint32_t>(id);
}
__device__ __forceinline__ std::int32_t rank_id(std::uint64_t key) {
  return static_cast<std::int32_t>(key & 0xffffffffu);
}
__device__ __forceinline__ float rank_value(float logit) { return isnan(logit) ? -INFINITY : logit; }

// SamplingRng: SplitMix64 and its uniform in [0, 1).
struct Rng {
  std::uint64_t state;
  __device__ double uniform() {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
};

// Shared memory of one row's block.
struct Shared {
  std::uint64_t keys[kChunk];
  unsigned int hist[256];
  std::uint64_t u64[kThreads / 32];
  float f32[kThreads / 32];
  double lanes[8];
  std::uint64_t prefix;
  unsigned int remaining;
  unsigned int count;
  double mass;
  std::int64_t found;
  std::uint64_t last_key;
};

// Block-wide min of 64-bit keys; every thread gets the result.
__device__ __forceinline__ std::uint64_t block_min(std::uint64_t v, Shared& sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const std::uint64_t w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w < v ? w : v;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.u64[threadIdx.x / 32] = v;
  __syncthreads();
  std::uint64_t m = sh.u64[0];
  for (int i = 1; i < kThreads / 32; ++i) m = sh.u64[i] < m ? sh.u64[i] : m;
  return m;
}

// Block-wide max of floats (NaN ignored, as fmaxf does).
__device__ __forceinline__ float block_max(float v, Shared& sh) {
  v = warp_max(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.f32[threadIdx.x / 32] = v;
  __syncthreads();
  float m = sh.f32[0];
  for (int i = 1; i < kThreads / 32; ++i) m = fmaxf(m, sh.f32[i]);
  return m;
}

// sampler_math::lane_sum of value(i) over i in [0, n): lane i % 8 adds its
// positive finite values in index order; the lanes combine pairwise. Threads
// 0..7 each run one lane; every thread gets the total.
template <typename ValueAt>
__device__ double lane_sum(std::int64_t n, ValueAt value, Shared& sh) {
  __syncthreads();
  if (threadIdx.x < 8) {
    double s = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += 8) {
      const float v = value(i);
      if (is_positive_finite(v)) s = __dadd_rn(s, static_cast<double>(v));
    }
    sh.lanes[threadIdx.x] = s;
  }
  __syncthreads();
  const double* l = sh.lanes;
  return __dadd_rn(__dadd_rn(__dadd_rn(l[0], l[1]), __dadd_rn(l[2], l[3])),
                   __dadd_rn(__dadd_rn(l[4], l[5]), __dadd_rn(l[6], l[7])));
}

// The n-th smallest rank key (1-based) among the keys above `lower` (all
// keys when !has_lower): eight passes of an 8-bit radix select. Keys are
// distinct, so exactly n keys lie in (lower, result].
template <typename KeyAt>
__device__ std::uint64_t select_rank(std::int64_t size, KeyAt key_at, bool has_lower, std::uint64_t lower,
                                     std::int64_t n, Shared& sh) {
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.remaining = static_cast<unsigned int>(n);
  }
  for (int pass = 7; pass >= 0; --pass) {
    const int shift = 8 * pass;
    const std::uint64_t high_mask = pass == 7 ? 0 : ~std::uint64_t{0} << (shift + 8);
    for (int i = threadIdx.x; i < 256; i += kThreads) sh.hist[i] = 0;
    __syncthreads();
    const std::uint64_t prefix = sh.prefix;
    for (std::int64_t i = threadIdx.x; i < size; i += kThreads) {
      const std::uint64_t k = key_at(i);
      if ((has_lower && k <= lower) || (k & high_mask) != (prefix & high_mask)) continue;
      atomicAdd(&sh.hist[(k >> shift) & 0xff], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned int cum = 0;
      for (int d = 0; d < 256; ++d) {
        if (cum + sh.hist[d] >= sh.remaining) {
          sh.prefix |= static_cast<std::uint64_t>(d) << shift;
          sh.remaining -= cum;
          break;
        }
        cum += sh.hist[d];
      }
    }
    __syncthreads();
  }
  return sh.prefix;
}

// Puts the keys in (lower, upper] (at most kChunk of them) into sh.keys in
// ascending order, padded with ~0; returns how many there are.
template <typename KeyAt>
__device__ int sorted_chunk(std::int64_t size, KeyAt key_at, bool has_lower, std::uint64_t lower, std::uint64_t upper,
                            Shared& sh) {
  for (int i = threadIdx.x; i < kChunk; i += kThreads) sh.keys[i] = ~std::uint64_t{0};
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  for (std::int64_t i = threadIdx.x; i < size; i += kThreads) {
    const std::uint64_t k = key_at(i);
    if ((has_lower && k <= lower) || k > upper) continue;
    const unsigned int at = atomicAdd(&sh.count, 1u);
    if (at < kChunk) sh.keys[at] = k;
  }
  __syncthreads();
  for (int width = 2; width <= kChunk; width <<= 1) {
    for (int j = width >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < kChunk; i += kThreads) {
        const int partner = i ^ j;
        if (partner <= i) continue;
        const bool ascending = (i & width) == 0;
        const std::uint64_t a = sh.keys[i], b = sh.keys[partner];
        if ((a > b) == ascending) {
          sh.keys[i] = b;
          sh.keys[partner] = a;
        }
      }
      __syncthreads();
    }
  }
  return static_cast<int>(min(sh.count, static_cast<unsigned int>(kChunk)));
}

}  // namespace folio::cuda::sampling
