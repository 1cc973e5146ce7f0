// The weight quantizer behind `folio quantize`: rewrites a GGUF model's
// weights into another type, block by block, optionally weighting each
// block's rounding error by how large the activations that meet each column
// are (an importance matrix from calibration text), and writes a GGUF file
// that folio and llama.cpp both load.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/gguf_file.h"
#include "model/quant_plan.h"
#include "offline/gptq.h"
#include "tensor/dtype.h"

namespace folio {

// Mean squared activation per input column of each weight (by tensor name),
// over the calibration tokens.
struct ImportanceMatrix {
  std::unordered_map<std::string, std::vector<float>> columns;
  // The whole second moments of each 2-D weight's input, where calibration
  // collected them (for GPTQ); weights that read the same input share one.
  std::unordered_map<std::string, std::shared_ptr<const InputCovariance>> covariances;
  std::int64_t tokens = 0;  // calibration tokens seen
};

// How codes are chosen. kImatrix: each block on its own, its squared error
// weighted by the importance (or uniform). kGptq: GPTQ (model/gptq.h) for
// every 2-D weight with a covariance in the importance, except the token
// embedding (its rows are also read as embeddings, where GPTQ's error
// spreading does not apply); the rest as kImatrix.
enum class QuantMethod { kImatrix, kGptq };

struct AwqScales;  // model/awq.h

struct QuantizeOptions {
  QuantRecipe recipe;
  QuantMethod method = QuantMethod::kImatrix;
  // AWQ's channel scales (model/awq.h), applied to the weights and norms
  // they name before encoding by either method (with kGptq, the covariance
  // scaled to match); nullptr: none.
  const AwqScales* awq = nullptr;
  GptqOptions gptq;
  // Tensor types forced by name (exact names), over the recipe's choice.
  std::unordered_map<std::string, DType> overrides;
  const ImportanceMatrix* importance = nullptr;
  // Without importance, each block's scales are still searched for the least
  // squared error (never worse than the reference encoder's block). true:
  // the legacy types (q4_0 .. q8_0) take the reference encoder's scales,
  // byte for byte what the gguf package writes.
  bool reference_scales = false;
  int threads = 0;  // 0: one per hardware thread
};

struct QuantizeSummary {
  std::uint64_t input_bytes = 0;   // tensor data
  std::uint64_t output_bytes = 0;  // tensor data
  std::int64_t parameters = 0;
  std::int64_t requantized = 0;    // tensors whose input was already quantized
  std::int64_t weighted = 0;       // tensors quantized with importance
  std::int64_t gptq = 0;           // of those, tensors quantized by GPTQ
  // Tensors GPTQ left to imatrix weighting: their calibration had fewer rows
  // than inputs, so the covariance lacks full rank and GPTQ overfits the text.
  std::int64_t gptq_short = 0;
  std::string gptq_short_example;  // one of them, for the message
  std::int64_t gptq_short_rows = 0, gptq_short_cols = 0;
  std::int64_t awq_scaled = 0;     // tensors rescaled by AWQ (matrices and norms)
  double bits_per_weight() const {
    return parameters > 0 ? 8.0 * static_cast<double>(output_bytes) / static_cast<double>(parameters) : 0.0;
  }
};

// Called after each tensor: (index, count, plan of that tensor).
using QuantizeProgress = std::function<void(std::size_t, std::size_t, const TensorQuantPlan&)>;

// Writes `in` with its tensors converted as planned to out_path (through a
// .part file, renamed when complete); metadata is copied, with
// general.file_type and general.quantization_version set.
QuantizeSummary quantize_gguf(const GgufFile& in, const std::string& out_path, const QuantizeOptions& options,
                              const QuantizeProgress& progress = {});

}  // namespace folio
