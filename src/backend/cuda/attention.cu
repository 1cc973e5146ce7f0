// Paged attention over the block tables, and the KV cache writes. Attention
// gives one warp to each (token, head): the query's numbers are spread over
// the lanes (dimension d on lane d % 32), keys are visited in position order,
// each dot product is a fixed butterfly over the lanes, and the softmax is
// online (running max and sum, the output rescaled as the max grows). The
// same code serves prefill and decode, so a query's bits depend only on its
// own cache rows: chunked prefill, batching and prefix hits change nothing.
// Cache rows are decoded as they are read, as tensor/kv_dtype.cc decodes them.
#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/glu_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch_check.h"
#include "tensor/kv_dtype.h"

namespace folio::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxChunks = static_cast<int>(kMaxAttentionHeadDim / 32);

// Number d of cache row `row`, decoded (one rounding for the scaled types).
__device__ __forceinline__ float kv_number(const KvPoolArgs& p, std::int64_t row, int d) {
  switch (static_cast<KvDType>(p.type)) {
    case KvDType::kF32:
      return static_cast<const float*>(p.codes)[row * p.dim + d];
    case KvDType::kF16:
      return f16_bits_to_f32(static_cast<const std::uint16_t*>(p.codes)[row * p.dim + d]);
    case KvDType::kBF16:
      return bf16_bits_to_f32(static_cast<const std::uint16_t*>(p.codes)[row * p.dim + d]);
    case KvDType::kQ8_0: {
      const auto q = static_cast<const std::int8_t*>(p.codes)[row * p.row_bytes + d];
      return __fmul_rn(static_cast<float>(q), f16_bits_to_f32(p.scales[row * p.row_scales + d / 32]));
    }
    case KvDType::kFp8E4M3: {
      const auto q = static_cast<const std::uint8_t*>(p.codes)[row * p.row_bytes + d];
      return __fmul_rn(fp8_e4m3_to_f32(q), f16_bits_to_f32(p.scales[row * p.row_scales]));
    }
  }
  return 0.0f;
}

__global__ void __launch_bounds__(32 * kWarpsPerBlock) attention_kernel(AttentionLaunch a) {
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (item >= a.num_tokens * a.heads) return;
  const std::int64_t t = item / a.heads, h = item % a.heads;
  // The sequence of token t: the last s with query_start[s] <= t.
  std::int64_t lo = 0, hi = a.num_seqs - 1;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (a.query_start[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const std::int64_t s = lo;
  const std::int64_t pos = a.positions[t];
  if (pos < 0 || pos >= a.seq_lens[s]) {
    if (lane == 0) report(a.status, kErrAttentionPosition, t, pos, a.seq_lens[s]);
    return;
  }
  const std::int64_t first = a.window > 0 ? max(std::int64_t{0}, pos - a.window + 1) : 0;
  const std::int64_t kvh = h / (a.heads / a.kv_heads);
  const std::int32_t* table = a.block_tables + s * a.max_blocks;
  const int hd = static_cast<int>(a.head_dim), vd = static_cast<int>(a.value_head_dim);

  float q[kMaxChunks], o[kMaxChunks];
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) {
    const int d = 32 * c + lane;
    q[c] = d < hd ? load_act(a.q, item * hd + d, a.kind) : 0.0f;
    o[c] = 0.0f;
  }
  float running_max = -INFINITY, running_sum = 0.0f;
  for (std::int64_t j = first; j <= pos; ++j) {
    const std::int32_t block = table[j / a.block_size];
    if (block < 0 || block >= a.num_blocks) {
      if (lane == 0) report(a.status, kErrAttentionBlock, t, block, a.num_blocks);
      return;
    }
    const std::int64_t row = (block * a.kv_heads + kvh) * a.block_size + j % a.block_size;
    float partial = 0.0f;
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) {
      const int d = 32 * c + lane;
      if (d < hd) partial = fmaf(q[c], kv_number(a.k, row, d), partial);
    }
    float score = __fmul_rn(warp_sum(partial), a.scale);
    if (a.softcap > 0.0f) score = __fmul_rn(a.softcap, tanhf(__fdiv_rn(score, a.softcap)));
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max);  // 0 for the first key
    const float p = expf(score - new_max);
    running_sum = fmaf(running_sum, correction, p);
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) {
      const int d = 32 * c + lane;
      if (d < vd) o[c] = fmaf(o[c], correction, __fmul_rn(p, kv_number(a.v, row, d)));
    }
    running_max = new_max;
  }
  if (a.sinks != nullptr) {  // the sink after the keys: it joins the max and the sum, and weighs no value
    const float correction = fold_sink(a.sinks[h], running_max, running_sum);
#pragma unroll
    for (int c = 0; c < kMaxChunks; ++c) o[c] = __fmul_rn(o[c], correction);
  }
#pragma unroll
  for (int c = 0; c < kMaxChunks; ++c) {
    const int d = 32 * c + lane;
    if (d < vd) store_act(a.out, item * vd + d, a.kind, __fdiv_rn(o[c], running_sum));
  }
}

// One warp per (token, KV head, pool): the row encoded from its own numbers.
__global__ void write_kv_kernel(WriteKvLaunch a) {
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (item >= a.num_tokens * a.kv_heads * 2) return;
  const bool is_v = item % 2 == 1;
  const std::int64_t th = item / 2, t = th / a.kv_heads, h = th % a.kv_heads;
  const std::int64_t slot = a.slots[t];
  if (slot < 0) return;
  if (slot >= a.num_slots) {
    if (lane == 0 && !is_v) report(a.status, kErrKvSlot, t, slot, a.num_slots);
    return;
  }
  const KvPoolArgs& p = is_v ? a.vp : a.kp;
  const void* src = is_v ? a.v : a.k;
  const std::int64_t x0 = th * p.dim;
  const std::int64_t row = ((slot / a.block_size) * a.kv_heads + h) * a.block_size + slot % a.block_size;
  switch (static_cast<KvDType>(p.type)) {
    case KvDType::kF32:
      for (int d = lane; d < p.dim; d += 32)
        static_cast<float*>(p.codes)[row * p.dim + d] = load_act(src, x0 + d, a.kind);
      break;
    case KvDType::kF16:
      for (int d = lane; d < p.dim; d += 32)
        static_cast<std::uint16_t*>(p.codes)[row * p.dim + d] = f32_to_f16_bits(load_act(src, x0 + d, a.kind));
      break;
    case KvDType::kBF16:
      for (int d = lane; d < p.dim; d += 32)
        static_cast<std::uint16_t*>(p.codes)[row * p.dim + d] = f32_to_bf16_bits(load_act(src, x0 + d, a.kind));
      break;
    case KvDType::kQ8_0:
      for (int b = 0; b < p.dim / 32; ++b) {
        const float x = load_act(src, x0 + 32 * b + lane, a.kind);
        const KvScale sc = kv_scale_for(warp_max(fmaxf(0.0f, fabsf(x))), 127.0f);
        static_cast<std::int8_t*>(p.codes)[row * p.row_bytes + 32 * b + lane] = to_q8(__fmul_rn(x, sc.inverse));
        if (lane == 0) p.scales[row * p.row_scales + b] = sc.bits;
      }
      break;
    case KvDType::kFp8E4M3: {
      float amax = 0.0f;
      for (int d = lane; d < p.dim; d += 32) amax = fmaxf(amax, fabsf(load_act(src, x0 + d, a.kind)));
      const KvScale sc = kv_scale_for(warp_max(amax), 448.0f);
      for (int d = lane; d < p.dim; d += 32)
        static_cast<std::uint8_t*>(p.codes)[row * p.row_bytes + d] =
            f32_to_fp8_e4m3(__fmul_rn(load_act(src, x0 + d, a.kind), sc.inverse));
      if (lane == 0) p.scales[row * p.row_scales] = sc.bits;
      break;
    }
  }
}

unsigned warp_blocks(std::int64_t items) {
  return static_cast<unsigned>((items + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void launch_attention(const AttentionLaunch& a, cudaStream_t stream) {
  const std::int64_t items = a.num_tokens * a.heads;
  if (items == 0) return;
  check_grid((items + kWarpsPerBlock - 1) / kWarpsPerBlock, "attention");
  attention_kernel<<<warp_blocks(items), 32 * kWarpsPerBlock, 0, stream>>>(a);
  check_launch("attention");
}

void launch_write_kv(const WriteKvLaunch& a, cudaStream_t stream) {
  const std::int64_t items = a.num_tokens * a.kv_heads * 2;
  if (items == 0) return;
  check_grid((items + kWarpsPerBlock - 1) / kWarpsPerBlock, "write_kv");
  write_kv_kernel<<<warp_blocks(items), 32 * kWarpsPerBlock, 0, stream>>>(a);
  check_launch("write_kv");
}

}  // namespace folio::cuda
