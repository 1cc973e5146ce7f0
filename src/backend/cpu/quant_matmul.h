// QuantMatmul: the CPU backend's matmul for every weight type, on the SIMD
// kernels of matmul_kernels.h, split over a thread pool by output rows. Each
// output is computed by one fixed sequence of operations that depends only on
// its weight row and its token's activations: never on the number of tokens,
// the token's place in the batch, the tile or the thread count (rule 5).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/buffer.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_kernels.h"
#include "core/thread_pool.h"
#include "tensor/tensor.h"

namespace folio {

enum class MatmulPrecision {
  kF32,  // weights decoded to f32 in registers, f32 FMAs: close to fp32 references
  kQ8,   // activations quantized to 8 bits per block, integer dots: fast, close to llama.cpp
};

class QuantMatmul {
 public:
  // Below AVX2 (or for a weight type without kernels) the reference loops run.
  QuantMatmul(const CpuFeatures& features, MatmulPrecision precision);
  MatmulPrecision precision() const { return precision_; }

  // y[n, m] = x[n, k] * w[m, k]^T (+ bias[m]); shapes already checked.
  void run(ThreadPool& pool, const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias);

  // The input of a group: x, or with up set, act(x) * up formed row by row
  // as the activations are prepared (never written out whole).
  struct Input {
    const Tensor* x = nullptr;
    const Tensor* up = nullptr;
    GluActivation act = GluActivation::kSilu;
  };
  // Whether run_group takes these weights (with a glu input if glu): SIMD
  // kernels for each, reading activations of one format, quantized if glu.
  bool groupable(std::span<const MatmulTarget> targets, bool glu) const;
  // run for every target over one input, the same bits as one run each: the
  // activations are prepared once and the row panels of all targets are
  // shared out over the threads in one pass (one wait instead of one each).
  void run_group(ThreadPool& pool, const Input& in, std::span<const MatmulTarget> targets);

  // out[i, :] = table[ids[i], :] as f32, bit-identical to dequantize_row; ids checked.
  void embedding(ThreadPool& pool, const Tensor& table, const Tensor& ids, Tensor& out);

  // Rewrites a weight into the packed layout (packed_weights.h) when these
  // kernels have packed kernels for its type, returning the new storage; an
  // empty Buffer leaves w as it is. run and embedding take either layout and
  // give the same bits.
  Buffer pack(ThreadPool& pool, Tensor& w) const;

 private:
  void run_reference(ThreadPool& pool, const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias);
  // The SIMD kernels for w, or null (the reference loops run).
  const WeightKernels* kernels_for(const Tensor& w) const;

  const MatmulKernels* kernels_ = nullptr;
  MatmulPrecision precision_;
  Buffer act_;                                     // [num_tokens, ActQ8Layout::row_bytes]
};

}  // namespace folio
