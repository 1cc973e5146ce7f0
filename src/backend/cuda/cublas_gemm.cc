#include "backend/cuda/cublas_gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>

#include "backend/cuda/kernels.h"
#include "core/error.h"

namespace folio::cuda {
namespace {

// Each scratch matrix (a chunk of decoded weights, a chunk of outputs) stays
// under this, so the path never needs more than a few hundred MiB.
constexpr std::size_t kChunkBytes = std::size_t{64} << 20;

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail("cuBLAS {} failed: {} ({})", what, cublasGetStatusString(s), static_cast<int>(s));
}

}  // namespace

CublasGemm::CublasGemm(CUstream_st* stream) : stream_(stream) {
  check(cublasCreate(&handle_), "cublasCreate");
  check(cublasSetStream(handle_, stream_), "cublasSetStream");
}

CublasGemm::~CublasGemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
  if (scratch_ != nullptr) cudaFree(scratch_);
}

void* CublasGemm::scratch(std::size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  if (scratch_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaFree(scratch_);
    scratch_ = nullptr;
  }
  if (cudaMalloc(&scratch_, bytes) != cudaSuccess)
    fail("out of GPU memory: the cuBLAS matmul path needs {} bytes of scratch", bytes);
  scratch_bytes_ = bytes;
  return scratch_;
}

void CublasGemm::run(const Tensor& w, const Tensor& x, int x_kind, Tensor& y, int y_kind, const Tensor* bias) {
  const std::int64_t m = w.rows(), k = w.cols(), n = x.rows();
  const bool bf16 = x_kind == kActBf16;
  const std::size_t elem = bf16 ? 2 : 4;
  // Rows per chunk: the decoded [rows, k] weights and the [n, rows] f32
  // results each within kChunkBytes, at least 64 rows.
  const auto by_w = static_cast<std::int64_t>(kChunkBytes / (elem * static_cast<std::size_t>(k)));
  const auto by_c = static_cast<std::int64_t>(kChunkBytes / (4 * static_cast<std::size_t>(n)));
  const std::int64_t chunk = std::min(m, std::max<std::int64_t>(64, std::min(by_w, by_c)));
  const std::size_t w_bytes = static_cast<std::size_t>(chunk * k) * elem;
  const std::size_t c_bytes = static_cast<std::size_t>(chunk * n) * 4;
  auto* base = static_cast<char*>(scratch(w_bytes + c_bytes));
  void* dense = base;
  auto* c = reinterpret_cast<float*>(base + w_bytes);
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const float alpha = 1.0f, beta = 0.0f;
  const std::int64_t w_row_bytes = static_cast<std::int64_t>(w.row_bytes());
  for (std::int64_t row0 = 0; row0 < m; row0 += chunk) {
    const std::int64_t rows = std::min(chunk, m - row0);
    launch_dequantize_rows(w.dtype, w.data, w_row_bytes, row0, rows, k, dense, x_kind, stream_);
    // Column-major: C[rows, n] = dense[k, rows]^T x[k, n], C read back as [n, rows] row-major.
    check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(n),
                       static_cast<int>(k), &alpha, dense, type, static_cast<int>(k), x.data, type, static_cast<int>(k),
                       &beta, c, CUDA_R_32F, static_cast<int>(rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    launch_finish_gemm(c, n, rows, bias != nullptr ? bias->as<const float>() : nullptr, row0, y.data, y_kind, y.cols(),
                       stream_);
  }
}

}  // namespace folio::cuda
