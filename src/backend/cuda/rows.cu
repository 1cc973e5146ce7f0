// The row-wise and element-wise ops: RMSNorm, RoPE, the GLUs, add, scale,
// row gathers and the sigmoid-gated add. Each output element is computed as
// the reference computes it, operation by operation (the _rn intrinsics keep
// the compiler from fusing); only the transcendental functions (expf, tanhf,
// sinf, cosf: CUDA's, not glibc's) and RMSNorm's sum of squares (a fixed
// tree over the row instead of a left-to-right sum) round differently.
#include <cstdint>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/glu_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch_check.h"
#include "backend/cuda/rope_math.cuh"

namespace folio::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t items) { return static_cast<unsigned>((items + kThreads - 1) / kThreads); }

__device__ __forceinline__ std::int64_t global_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// One block per row: the sum of squares by thread (strided), then by warp,
// then the 8 warp totals in order; every step fixed, so rows are independent.
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const void* x, const float* w, float eps, void* out, int kind, std::int64_t cols) {
  __shared__ float warp_totals[kThreads / 32];
  __shared__ float inv_shared;
  const std::int64_t r = blockIdx.x;
  float sum = 0.0f;
  for (std::int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float v = load_act(x, r * cols + i, kind);
    sum = __fadd_rn(sum, __fmul_rn(v, v));
  }
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int i = 0; i < kThreads / 32; ++i) total = __fadd_rn(total, warp_totals[i]);
    inv_shared = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, static_cast<float>(cols)), eps)));
  }
  __syncthreads();
  const float inv = inv_shared;
  for (std::int64_t i = threadIdx.x; i < cols; i += kThreads) {
    const float v = load_act(x, r * cols + i, kind);
    store_act(out, r * cols + i, kind, __fmul_rn(__fmul_rn(v, inv), w[i]));
  }
}

// One activation head of the rope kernel (rope_math.cuh's Head).
struct ActHead {
  void* x;
  int kind;
  std::int64_t base;
  __device__ float load(std::int64_t d) const { return load_act(x, base + d, kind); }
  __device__ void store(std::int64_t d, float v) const { store_act(x, base + d, kind, v); }
};

// One thread per rotated pair (rope_math.cuh's rope_pair).
__global__ void rope_kernel(void* x, int kind, const std::int32_t* positions, const float* inv_freq,
                            std::int64_t tokens, std::int64_t heads, std::int64_t head_dim, int dim, bool neox,
                            float factor, RopeTemperature temperature) {
  const std::int64_t half = dim / 2;
  const std::int64_t item = global_index();
  if (item >= tokens * heads * half) return;
  const std::int64_t i = item % half, th = item / half, t = th / heads;
  ActHead head{x, kind, th * head_dim};
  rope_pair(head, static_cast<float>(positions[t]), inv_freq[i], i, dim, head_dim, neox, factor, temperature);
}

__device__ __forceinline__ float silu(float g) { return __fdiv_rn(g, __fadd_rn(1.0f, expf(-g))); }

__device__ __forceinline__ float gelu_tanh(float g) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
  const float inner = __fmul_rn(kSqrt2OverPi, __fadd_rn(g, cube));
  return __fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(inner)));
}

__global__ void glu_kernel(const void* gate, const void* up, void* out, int kind, std::int64_t n, int act) {
  const std::int64_t i = global_index();
  if (i >= n) return;
  const float g = load_act(gate, i, kind), u = load_act(up, i, kind);
  float v = 0.0f;
  switch (act) {
    case kGluSilu: v = __fmul_rn(silu(g), u); break;
    case kGluGeluTanh: v = __fmul_rn(gelu_tanh(g), u); break;
    case kGluSwigluClamped: v = swiglu_clamped(g, u); break;
    case kGluSigmoid: v = __fmul_rn(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g))), u); break;
  }
  store_act(out, i, kind, v);
}

__global__ void add_kernel(void* x, const void* y, int kind, std::int64_t n) {
  const std::int64_t i = global_index();
  if (i < n) store_act(x, i, kind, __fadd_rn(load_act(x, i, kind), load_act(y, i, kind)));
}

__global__ void scale_kernel(void* x, int kind, std::int64_t n, float s) {
  const std::int64_t i = global_index();
  if (i < n) store_act(x, i, kind, __fmul_rn(load_act(x, i, kind), s));
}

__global__ void scale_logits_kernel(float* x, std::int64_t n, float scale, float softcap) {
  const std::int64_t i = global_index();
  if (i >= n) return;
  float v = __fmul_rn(x[i], scale);
  if (softcap > 0.0f) v = __fmul_rn(softcap, tanhf(__fdiv_rn(v, softcap)));
  x[i] = v;
}

// Rows copied in units of `unit` bytes (4, 2 or 1, whatever the row length
// and both pointers allow).
__global__ void gather_rows_kernel(const std::uint8_t* x, std::int64_t row_bytes, std::int64_t num_x_rows,
                                   const std::int32_t* rows, std::int64_t n, std::uint8_t* out, int unit,
                                   DeviceStatus* status) {
  const std::int64_t units = row_bytes / unit;
  const std::int64_t item = global_index();
  if (item >= n * units) return;
  const std::int64_t i = item / units, u = item % units;
  const std::int32_t r = rows[i];
  if (r < 0 || r >= num_x_rows) {
    if (u == 0) report(status, kErrGatherRow, r, num_x_rows, 0);
    return;
  }
  const std::int64_t src = r * row_bytes + u * unit, dst = i * row_bytes + u * unit;
  if (unit == 4) {
    *reinterpret_cast<std::uint32_t*>(out + dst) = *reinterpret_cast<const std::uint32_t*>(x + src);
  } else if (unit == 2) {
    *reinterpret_cast<std::uint16_t*>(out + dst) = *reinterpret_cast<const std::uint16_t*>(x + src);
  } else {
    out[dst] = x[src];
  }
}

__global__ void add_sigmoid_gated_kernel(void* x, const void* y, const void* gate, int kind, std::int64_t rows,
                                         std::int64_t cols) {
  const std::int64_t i = global_index();
  if (i >= rows * cols) return;
  const float g = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-load_act(gate, i / cols, kind))));
  store_act(x, i, kind, __fadd_rn(load_act(x, i, kind), __fmul_rn(g, load_act(y, i, kind))));
}

// One thread per output number; a copy, so any activation type's bits move as they are.
__global__ void concat_cols_kernel(const void* a, std::int64_t a_cols, const void* b, std::int64_t b_cols, void* out,
                                   std::int64_t rows, int kind) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t cols = a_cols + b_cols;
  if (i >= rows * cols) return;
  const std::int64_t r = i / cols, c = i % cols;
  const float v = c < a_cols ? load_act(a, r * a_cols + c, kind) : load_act(b, r * b_cols + c - a_cols, kind);
  store_act(out, i, kind, v);
}

}  // namespace

void launch_rms_norm(const void* x, const float* w, float eps, void* out, int kind, std::int64_t rows,
                     std::int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  check_grid(rows, "rms_norm");
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, eps, out, kind, cols);
  check_launch("rms_norm");
}

void launch_rope(void* x, int kind, const std::int32_t* positions, const float* inv_freq, std::int64_t tokens,
                 std::int64_t heads, std::int64_t head_dim, int dim, bool neox, float attention_factor,
                 RopeTemperature temperature, cudaStream_t stream) {
  const std::int64_t items = tokens * heads * (dim / 2);
  if (items == 0) return;
  rope_kernel<<<blocks_for(items), kThreads, 0, stream>>>(x, kind, positions, inv_freq, tokens, heads, head_dim, dim,
                                                          neox, attention_factor, temperature);
  check_launch("rope");
}

void launch_glu(const void* gate, const void* up, void* out, int kind, std::int64_t n, int act, cudaStream_t stream) {
  if (n == 0) return;
  glu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, up, out, kind, n, act);
  check_launch("glu");
}

void launch_add(void* x, const void* y, int kind, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, kind, n);
  check_launch("add");
}

void launch_scale(void* x, int kind, std::int64_t n, float s, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, kind, n, s);
  check_launch("scale");
}

void launch_scale_logits(float* logits, std::int64_t n, float scale, float softcap, cudaStream_t stream) {
  if (n == 0) return;
  scale_logits_kernel<<<blocks_for(n), kThreads, 0, stream>>>(logits, n, scale, softcap);
  check_launch("scale_logits");
}

void launch_gather_rows(const void* x, std::int64_t row_bytes, std::int64_t num_x_rows, const std::int32_t* rows,
                        std::int64_t n, void* out, DeviceStatus* status, cudaStream_t stream) {
  if (n == 0 || row_bytes == 0) return;
  const auto bits = reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(out) |
                    static_cast<std::uintptr_t>(row_bytes);
  const int unit = bits % 4 == 0 ? 4 : bits % 2 == 0 ? 2 : 1;
  gather_rows_kernel<<<blocks_for(n * (row_bytes / unit)), kThreads, 0, stream>>>(
      static_cast<const std::uint8_t*>(x), row_bytes, num_x_rows, rows, n, static_cast<std::uint8_t*>(out), unit,
      status);
  check_launch("gather_rows");
}

void launch_concat_cols(const void* a, std::int64_t a_cols, const void* b, std::int64_t b_cols, void* out,
                        std::int64_t rows, int kind, cudaStream_t stream) {
  if (rows * (a_cols + b_cols) == 0) return;
  concat_cols_kernel<<<blocks_for(rows * (a_cols + b_cols)), kThreads, 0, stream>>>(a, a_cols, b, b_cols, out, rows,
                                                                                    kind);
  check_launch("concat_cols");
}

void launch_add_sigmoid_gated(void* x, const void* y, const void* gate, int kind, std::int64_t rows, std::int64_t cols,
                              cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_sigmoid_gated_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(x, y, gate, kind, rows, cols);
  check_launch("add_sigmoid_gated");
}

}  // namespace folio::cuda
