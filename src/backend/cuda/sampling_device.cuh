// The block-wide tools of the sampling op, one block per row: reductions,
// lane sums in sampler_math's fixed order, and a radix select plus bitonic
// sort that list a row's tokens in rank order chunk by chunk (most likely
// first, ties to the lower id), which top-k and top-p walk. The arithmetic
// itself is sampling_math.cuh's.
#pragma once

#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/sampling_math.cuh"

namespace folio::cuda::sampling {

inline constexpr int kThreads = 256;  // one block per row
inline constexpr int kChunk = 1024;   // tokens sorted at a time

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
