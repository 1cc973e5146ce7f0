// CublasGemm: the matmul path for batches above a few tokens when batch
// invariance is switched off (BackendOptions::batch_invariant = false):
// weight rows decoded in chunks into a dense f32 or bf16 scratch matrix,
// multiplied by cuBLAS with f32 accumulation into an f32 scratch, then bias
// and the output type applied. cuBLAS picks its algorithm (and any split of
// the k loop) by shape, so a row's bits then depend on how many rows share
// the call; that is why it is an option and not the default.
#pragma once

#include <cstddef>

#include "backend/buffer.h"
#include "tensor/tensor.h"

struct cublasContext;
struct CUstream_st;

namespace folio::cuda {

class CublasGemm {
 public:
  explicit CublasGemm(CUstream_st* stream);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // y = x w^T (+ bias); x and y in the activation kinds given (kernel_args.h).
  void run(const Tensor& w, const Tensor& x, int x_kind, Tensor& y, int y_kind, const Tensor* bias);

 private:
  void* scratch(std::size_t bytes);

  CUstream_st* stream_;
  cublasContext* handle_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace folio::cuda
