// Quantization plans: the named recipes (q4_k_m, q8_0, ...) and the type each
// tensor of a model gets under one, for `folio quantize` and for the random
// weights of --load-format dummy. Pure: names, types and shapes only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/gguf_file.h"
#include "tensor/dtype.h"

namespace folio {

// A named quantization: the type most weights get, and how the rest differ.
// "q4_k_m"-style mixes spend more bits where errors hurt most (the output
// projection, attention values and the FFN down projection of some layers).
struct QuantRecipe {
  std::string name;      // as typed: q8_0, q4_k_m, f16, ...
  DType base;            // the type of most weights
  std::uint32_t file_type;  // general.file_type, the numbering llama.cpp reads
  enum class Mix { kPure, kSmall, kMedium } mix = Mix::kPure;
};

std::optional<QuantRecipe> parse_quant_recipe(std::string_view name);
std::vector<std::string> quant_recipe_names();

// What happens to one tensor.
struct TensorQuantPlan {
  std::string name;
  DType from;
  DType to;
  std::string why;  // why `to` differs from the recipe's base type, or empty
};

// What the plan needs of a tensor: its GGUF name, type, dimensions and row length.
struct TensorToPlan {
  std::string name;
  DType type;
  int num_dims;
  std::int64_t row;  // elements of the innermost dimension
};

// The type of every tensor under `recipe`, in order; `overrides` forces types
// by exact tensor name. Throws an Error for a recipe the tensors cannot take.
std::vector<TensorQuantPlan> plan_quantization(const std::vector<TensorToPlan>& tensors, const QuantRecipe& recipe,
                                               const std::unordered_map<std::string, DType>& overrides = {});
// The same for the tensors of a GGUF file, in file order.
std::vector<TensorQuantPlan> plan_quantization(const GgufFile& in, const QuantRecipe& recipe,
                                               const std::unordered_map<std::string, DType>& overrides = {});

}  // namespace folio
