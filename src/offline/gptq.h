// GPTQ (Frantar et al., 2022) for GGUF's block types: a weight's codes are
// chosen one input column at a time, and each column's rounding error is
// pushed into the columns not yet quantized, in the proportion the input's
// second moments say cancels it in the output. The scales of each block are
// the weighted encoder's (tensor/quantize.h), fitted to the block as it
// stands when GPTQ reaches it; the codes under them are GPTQ's own, set
// through the type's code layout (tensor/code_layout.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "tensor/dtype.h"

namespace folio {

// The second moments of a weight's input over calibration text.
struct InputCovariance {
  std::int64_t cols = 0;
  std::int64_t rows = 0;   // calibration rows summed
  // [cols, cols]: sum over rows of x x^T; only its upper triangle (j >= i)
  // is kept, the matrix being symmetric.
  std::vector<float> sum;
};

// Adds x ([rows, h.cols], row-major) to h.
void accumulate_covariance(InputCovariance& h, const float* x, std::int64_t rows);

struct GptqOptions {
  // Added to the diagonal as a fraction of its mean, so the factorisation
  // exists when some inputs are (nearly) linearly dependent.
  double damp = 0.01;
};

// Quantizes w ([rows, cols], row-major; overwritten with scratch values) to
// `type` into dst (rows rows of row_bytes(type, cols)), minimising
// sum over the calibration rows x of |(w - decoded) x|^2. cols must be whole
// blocks of type and h must have cols columns. Throws an Error where the
// build has no OpenBLAS (linalg::available()) or the type has no code layout.
void gptq_quantize(DType type, float* w, std::int64_t rows, std::int64_t cols, const InputCovariance& h,
                   std::uint8_t* dst, ThreadPool& pool, const GptqOptions& options = {});

}  // namespace folio
