// Matrix products over GGUF blocks read in place, and the embedding lookup.
// The product is batch-invariant by construction: one warp owns one output
// row o for a tile of up to 8 tokens; lane l decodes sub-blocks l, l + 32, ...
// of w's row o (32 numbers each), accumulates each token's dot product over
// them in that order, and the warp adds its 32 partial sums by a fixed
// butterfly. Nothing in that order depends on n, on where a token sits in
// its tile, or on expert grouping, so a row's bits never depend on its batch.
// Blocks are numbered so that consecutive ones share weight rows and walk the
// token tiles: a prefill reads each weight row from memory about once.
#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch_check.h"

namespace folio::cuda {
namespace {

constexpr int kTileTokens = 8;    // tokens per warp pass
constexpr int kRowsPerBlock = 8;  // warps per block, one output row each

// The token range of tile `tile`: plain tiles of 8, or in expert mode the
// tiles of each expert's row range in turn. False when the tile is empty.
__device__ bool tile_range(const MatmulLaunch& a, std::int64_t tile, std::int64_t& t0, std::int64_t& t_end,
                           std::int64_t& expert) {
  if (a.offsets == nullptr) {
    t0 = tile * kTileTokens;
    t_end = min(a.n, t0 + kTileTokens);
    expert = 0;
    return t0 < t_end;
  }
  for (std::int64_t e = 0; e < a.num_experts; ++e) {
    const std::int64_t begin = a.offsets[e], end = a.offsets[e + 1];
    if (begin < 0 || end < begin || end > a.n) continue;  // refused by the offsets check
    const std::int64_t tiles = (end - begin + kTileTokens - 1) / kTileTokens;
    if (tile < tiles) {
      t0 = begin + tile * kTileTokens;
      t_end = min(end, t0 + kTileTokens);
      expert = e;
      return true;
    }
    tile -= tiles;
  }
  return false;
}

template <DType T, int XKind>
__global__ void __launch_bounds__(32 * kRowsPerBlock) matmul_kernel(MatmulLaunch a, std::int64_t num_tiles) {
  const std::int64_t tile = blockIdx.x % num_tiles;
  const std::int64_t group = blockIdx.x / num_tiles;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t o = group * kRowsPerBlock + warp;
  std::int64_t t0 = 0, t_end = 0, expert = 0;
  if (o >= a.m || !tile_range(a, tile, t0, t_end, expert)) return;  // whole warps leave together
  const int nt = static_cast<int>(t_end - t0);
  const auto* w_row = static_cast<const std::uint8_t*>(a.w) + (expert * a.m + o) * a.w_row_bytes;
  constexpr bool kPlain = T == DType::F32 || T == DType::F16 || T == DType::BF16;
  const std::int64_t k = a.k, num_sub = (k + 31) / 32;

  float acc[kTileTokens];
#pragma unroll
  for (int t = 0; t < kTileTokens; ++t) acc[t] = 0.0f;
  for (std::int64_t s = lane; s < num_sub; s += 32) {
    float wv[32];  // [32] numbers of w's row o
    dequant32<T>(w_row, s, k, wv);
#pragma unroll
    for (int t = 0; t < kTileTokens; ++t) {
      if (t >= nt) break;
      const std::int64_t base = (t0 + t) * k + 32 * s;
      float sum = acc[t];
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        float xv = 0.0f;
        if (!kPlain || 32 * s + e < k) {
          if constexpr (XKind == kActBf16)
            xv = bf16_bits_to_f32(static_cast<const std::uint16_t*>(a.x)[base + e]);
          else
            xv = static_cast<const float*>(a.x)[base + e];
        }
        sum = fmaf(wv[e], xv, sum);
      }
      acc[t] = sum;
    }
  }
#pragma unroll
  for (int t = 0; t < kTileTokens; ++t) {
    if (t >= nt) break;
    float total = warp_sum(acc[t]);
    if (lane == t) {
      if (a.bias != nullptr) total = __fadd_rn(total, a.bias[expert * a.m + o]);
      store_act(a.y, (t0 + t) * a.y_stride + o, a.y_kind, total);
    }
  }
}

template <DType T>
void launch_typed(const MatmulLaunch& a, std::int64_t num_tiles, std::int64_t blocks, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(blocks)), threads(32 * kRowsPerBlock);
  if (a.x_kind == kActBf16)
    matmul_kernel<T, kActBf16><<<grid, threads, 0, stream>>>(a, num_tiles);
  else
    matmul_kernel<T, kActF32><<<grid, threads, 0, stream>>>(a, num_tiles);
}

__global__ void embedding_kernel(EmbeddingLaunch a) {
  const std::int64_t i = blockIdx.x;
  const std::int32_t id = a.ids[i];
  if (id < 0 || id >= a.vocab) {
    if (threadIdx.x == 0) report(a.status, kErrEmbeddingId, id, a.vocab, 0);
    return;
  }
  const auto* row = static_cast<const std::uint8_t*>(a.table) + id * a.row_bytes;
  const std::int64_t num_sub = (a.dim + 31) / 32;
  for (std::int64_t s = threadIdx.x; s < num_sub; s += blockDim.x) {
    float v[32];
    dequant32_any(a.type, row, s, a.dim, v);
    for (int e = 0; e < 32 && 32 * s + e < a.dim; ++e) store_act(a.out, i * a.dim + 32 * s + e, a.out_kind, v[e]);
  }
}

__global__ void dequantize_rows_kernel(DType type, const std::uint8_t* w, std::int64_t row_bytes, std::int64_t row0,
                                       std::int64_t rows, std::int64_t k, void* out, int out_kind) {
  const std::int64_t num_sub = (k + 31) / 32;
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= rows * num_sub) return;
  const std::int64_t r = item / num_sub, s = item % num_sub;
  float v[32];
  dequant32_any(type, w + (row0 + r) * row_bytes, s, k, v);
  for (int e = 0; e < 32 && 32 * s + e < k; ++e) store_act(out, r * k + 32 * s + e, out_kind, v[e]);
}

__global__ void finish_gemm_kernel(const float* c, std::int64_t n, std::int64_t cols, const float* bias,
                                   std::int64_t col0, void* y, int y_kind, std::int64_t y_stride) {
  const std::int64_t item = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= n * cols) return;
  const std::int64_t t = item / cols, j = item % cols;
  float v = c[item];
  if (bias != nullptr) v = __fadd_rn(v, bias[col0 + j]);
  store_act(y, t * y_stride + col0 + j, y_kind, v);
}

unsigned blocks_for(std::int64_t items, int threads) { return static_cast<unsigned>((items + threads - 1) / threads); }

}  // namespace

void launch_matmul(const MatmulLaunch& a, cudaStream_t stream) {
  if (a.m == 0 || a.n == 0) return;
  const std::int64_t num_tiles = (a.n + kTileTokens - 1) / kTileTokens + (a.offsets != nullptr ? a.num_experts : 0);
  const std::int64_t groups = (a.m + kRowsPerBlock - 1) / kRowsPerBlock;
  const std::int64_t blocks = num_tiles * groups;
  check_grid(blocks, "matmul");
  switch (a.wtype) {
    case DType::F32:
      launch_typed<DType::F32>(a, num_tiles, blocks, stream);
      break;
    case DType::F16:
      launch_typed<DType::F16>(a, num_tiles, blocks, stream);
      break;
    case DType::BF16:
      launch_typed<DType::BF16>(a, num_tiles, blocks, stream);
      break;
    case DType::Q4_0:
      launch_typed<DType::Q4_0>(a, num_tiles, blocks, stream);
      break;
    case DType::Q4_1:
      launch_typed<DType::Q4_1>(a, num_tiles, blocks, stream);
      break;
    case DType::Q5_0:
      launch_typed<DType::Q5_0>(a, num_tiles, blocks, stream);
      break;
    case DType::Q5_1:
      launch_typed<DType::Q5_1>(a, num_tiles, blocks, stream);
      break;
    case DType::Q8_0:
      launch_typed<DType::Q8_0>(a, num_tiles, blocks, stream);
      break;
    case DType::Q2_K:
      launch_typed<DType::Q2_K>(a, num_tiles, blocks, stream);
      break;
    case DType::Q3_K:
      launch_typed<DType::Q3_K>(a, num_tiles, blocks, stream);
      break;
    case DType::Q4_K:
      launch_typed<DType::Q4_K>(a, num_tiles, blocks, stream);
      break;
    case DType::Q5_K:
      launch_typed<DType::Q5_K>(a, num_tiles, blocks, stream);
      break;
    case DType::Q6_K:
      launch_typed<DType::Q6_K>(a, num_tiles, blocks, stream);
      break;
    case DType::IQ4_NL:
      launch_typed<DType::IQ4_NL>(a, num_tiles, blocks, stream);
      break;
    case DType::IQ4_XS:
      launch_typed<DType::IQ4_XS>(a, num_tiles, blocks, stream);
      break;
    case DType::MXFP4:
      launch_typed<DType::MXFP4>(a, num_tiles, blocks, stream);
      break;
    case DType::NVFP4:
      launch_typed<DType::NVFP4>(a, num_tiles, blocks, stream);
      break;
    default:
      launch_failed("matmul: no kernel for this weight type");
  }
  check_launch("matmul");
}

void launch_embedding(const EmbeddingLaunch& a, cudaStream_t stream) {
  if (a.n == 0) return;
  check_grid(a.n, "embedding");
  embedding_kernel<<<static_cast<unsigned>(a.n), 128, 0, stream>>>(a);
  check_launch("embedding");
}

void launch_dequantize_rows(DType type, const void* w, std::int64_t row_bytes, std::int64_t row0, std::int64_t rows,
                            std::int64_t k, void* out, int out_kind, cudaStream_t stream) {
  const std::int64_t items = rows * ((k + 31) / 32);
  if (items == 0) return;
  dequantize_rows_kernel<<<blocks_for(items, 256), 256, 0, stream>>>(type, static_cast<const std::uint8_t*>(w),
                                                                     row_bytes, row0, rows, k, out, out_kind);
  check_launch("dequantize_rows");
}

void launch_finish_gemm(const float* c_f32, std::int64_t n, std::int64_t cols, const float* bias, std::int64_t col0,
                        void* y, int y_kind, std::int64_t y_stride, cudaStream_t stream) {
  if (n * cols == 0) return;
  finish_gemm_kernel<<<blocks_for(n * cols, 256), 256, 0, stream>>>(c_f32, n, cols, bias, col0, y, y_kind, y_stride);
  check_launch("finish_gemm");
}

}  // namespace folio::cuda
