// The CUDA backend's kernel launches, as plain C++ calls: CudaBackend (host
// code) fills a record of raw device pointers and sizes, and each .cu file
// launches its kernels on the backend's one stream. Shapes are in the
// comments; every launch with no work returns without launching.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/kernel_args.h"
#include "backend/grouped_routing.h"
#include "backend/sampling/sampling_batch.h"
#include "tensor/dtype.h"

namespace folio::cuda {

// y[t, o] = sum_i w[o, i] x[t, i] (+ bias[o]); the batch-invariant kernel:
// every output is one warp's fixed-order reduction whatever n is. With
// offsets, w is [num_experts, m, k] and row t uses expert e where
// offsets[e] <= t < offsets[e + 1] (expert_matmul).
struct MatmulLaunch {
  DType wtype = DType::F32;
  const void* w = nullptr;  // [m, k] (or [num_experts, m, k]) GGUF rows
  std::int64_t w_row_bytes = 0;
  std::int64_t m = 0, k = 0;
  const void* x = nullptr;  // [n, k] activations
  int x_kind = kActF32;
  std::int64_t n = 0;
  void* y = nullptr;  // [n, y_stride], columns [0, m) written
  int y_kind = kActF32;
  std::int64_t y_stride = 0;
  const float* bias = nullptr;            // [m] (with offsets [num_experts, m]) or null
  const std::int32_t* offsets = nullptr;  // [num_experts + 1] or null
  std::int64_t num_experts = 0;
  DeviceStatus* status = nullptr;
};
void launch_matmul(const MatmulLaunch& a, cudaStream_t stream);

// out[i, :] = table[ids[i], :] decoded; out: [n, dim] activations.
struct EmbeddingLaunch {
  DType type = DType::F32;
  const void* table = nullptr;  // [vocab, dim]
  std::int64_t row_bytes = 0, vocab = 0, dim = 0;
  const std::int32_t* ids = nullptr;  // [n]
  std::int64_t n = 0;
  void* out = nullptr;
  int out_kind = kActF32;
  DeviceStatus* status = nullptr;
};
void launch_embedding(const EmbeddingLaunch& a, cudaStream_t stream);

// out[r, :] = rows [row0, row0 + rows) of w decoded, as f32 or bf16 (the
// dense operand of the cuBLAS path); out: [rows, k].
void launch_dequantize_rows(DType type, const void* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t rows,
                            std::int64_t k, void* out, int out_kind, cudaStream_t stream);
// y[t, col0 + c] = c_f32[t, c] (+ bias[col0 + c]) for c < cols; c_f32: [n, cols].
void launch_finish_gemm(const float* c_f32, std::int64_t n, std::int64_t cols, const float* bias, std::int64_t col0,
                        void* y, int y_kind, std::int64_t y_stride, cudaStream_t stream);

// Row-wise ops over activations of one kind.
void launch_rms_norm(const void* x, const float* w, float eps, void* out, int kind, std::int64_t rows,
                     std::int64_t cols, cudaStream_t stream);
// x: [tokens, heads, head_dim] rotated in place; inv_freq: [dim / 2].
void launch_rope(void* x, int kind, const std::int32_t* positions, const float* inv_freq, std::int64_t tokens,
                 std::int64_t heads, std::int64_t head_dim, int dim, bool neox, float attention_factor,
                 RopeTemperature temperature, cudaStream_t stream);
// out = act(gate) * up; act: a GluActivation as int (silu, the tanh GELU,
// gpt-oss's clamped SwiGLU).
void launch_glu(const void* gate, const void* up, void* out, int kind, std::int64_t n, int act, cudaStream_t stream);
void launch_add(void* x, const void* y, int kind, std::int64_t n, cudaStream_t stream);
void launch_scale(void* x, int kind, std::int64_t n, float s, cudaStream_t stream);
// logits: n f32, x = x * scale, then softcap * tanh(x / softcap) when softcap > 0.
void launch_scale_logits(float* logits, std::int64_t n, float scale, float softcap, cudaStream_t stream);
// out[i, :] = x[rows[i], :], row_bytes bytes a row.
void launch_gather_rows(const void* x, std::int64_t row_bytes, std::int64_t num_x_rows, const std::int32_t* rows,
                        std::int64_t n, void* out, DeviceStatus* status, cudaStream_t stream);
// x[t, :] += sigmoid(gate[t]) * y[t, :]; x, y: [rows, cols], gate: [rows].
void launch_concat_cols(const void* a, std::int64_t a_cols, const void* b, std::int64_t b_cols, void* out,
                        std::int64_t rows, int kind, cudaStream_t stream);
void launch_add_sigmoid_gated(void* x, const void* y, const void* gate, int kind, std::int64_t rows, std::int64_t cols,
                              cudaStream_t stream);

// Paged attention: one warp per (token, head), keys in order with an online
// softmax; GQA, sliding window, soft-capping, attention sinks, every KV type.
struct AttentionLaunch {
  const void* q = nullptr;  // [num_tokens, heads, head_dim]
  void* out = nullptr;      // [num_tokens, heads, value_head_dim]
  int kind = kActF32;
  std::int64_t num_tokens = 0, heads = 0, kv_heads = 0, head_dim = 0, value_head_dim = 0;
  const std::int32_t* positions = nullptr;     // [num_tokens]
  const std::int32_t* query_start = nullptr;   // [num_seqs + 1]
  const std::int32_t* seq_lens = nullptr;      // [num_seqs]
  const std::int32_t* block_tables = nullptr;  // [num_seqs, max_blocks]
  std::int64_t num_seqs = 0, max_blocks = 0;
  KvPoolArgs k, v;
  std::int64_t block_size = 0, num_blocks = 0;
  float scale = 1.0f;
  std::int64_t window = 0;
  float softcap = 0.0f;
  const float* sinks = nullptr;  // [heads] or null
  DeviceStatus* status = nullptr;
};
// Head sizes the kernel holds in registers.
inline constexpr std::int64_t kMaxAttentionHeadDim = 512;
void launch_attention(const AttentionLaunch& a, cudaStream_t stream);

// k, v: [num_tokens, kv_heads, dim] into slots (negative: skipped).
struct WriteKvLaunch {
  const void* k = nullptr;
  const void* v = nullptr;
  int kind = kActF32;
  const std::int32_t* slots = nullptr;
  std::int64_t num_tokens = 0, kv_heads = 0, block_size = 0, num_slots = 0;
  KvPoolArgs kp, vp;
  DeviceStatus* status = nullptr;
};
void launch_write_kv(const WriteKvLaunch& a, cudaStream_t stream);

// Mixture of experts (backend.h has the contract of each).
void launch_moe_route(const void* logits, int kind, std::int64_t tokens, std::int64_t experts, std::int64_t k,
                      bool normalize, std::int32_t* ids, float* weights, cudaStream_t stream);
void launch_moe_route_grouped(const void* logits, int kind, const float* bias, std::int64_t tokens,
                              std::int64_t experts, std::int64_t k, const GroupedRouting& routing, std::int32_t* ids,
                              float* weights, cudaStream_t stream);
void launch_moe_group(const std::int32_t* ids, std::int64_t n, std::int64_t k, std::int64_t experts,
                      std::int32_t* offsets, std::int32_t* row_tokens, std::int32_t* assignment_rows,
                      DeviceStatus* status, cudaStream_t stream);
void launch_moe_combine(const void* y, std::int64_t y_rows, const std::int32_t* assignment_rows, const float* weights,
                        std::int64_t tokens, std::int64_t k, std::int64_t d, void* out, int kind, DeviceStatus* status,
                        cudaStream_t stream);
// Checks offsets: [experts + 1] non-decreasing within [0, rows].
void launch_check_expert_offsets(const std::int32_t* offsets, std::int64_t experts, std::int64_t rows,
                                 DeviceStatus* status, cudaStream_t stream);

// The sampling op, one block per row (sampling_kernel.cu).
struct SampleLaunch {
  const float* logits = nullptr;  // [logits_rows, vocab]
  std::int64_t logits_rows = 0, vocab = 0;
  const SamplingRowParams* rows = nullptr;
  std::int64_t num_rows = 0;
  const LogitAdjustment* adjustments = nullptr;
  std::int64_t num_adjustments = 0;
  SampleResult* results = nullptr;
  LogprobResult* logprobs = nullptr;
  std::int64_t num_logprob_rows = 0;
  const std::uint32_t* masks = nullptr;  // [num_masks, mask_words] token bitsets (structured outputs)
  std::int64_t num_masks = 0, mask_words = 0;
  float* scratch = nullptr;  // [num_rows, kSampleScratchRows * vocab] floats
  DeviceStatus* status = nullptr;
};
// Rows of vocab floats of scratch the sampling op needs per sampled row: the
// biased and penalised logits, the distribution, and the logits under the
// row's token mask.
inline constexpr std::int64_t kSampleScratchRows = 3;
void launch_sample(const SampleLaunch& a, cudaStream_t stream);

}  // namespace folio::cuda
