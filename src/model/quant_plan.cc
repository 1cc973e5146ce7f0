#include "model/quant_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/error.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

using Mix = QuantRecipe::Mix;

// general.file_type values as llama.cpp numbers them.
constexpr QuantRecipe kRecipes[] = {
    {"f32", DType::F32, 0, Mix::kPure},      {"f16", DType::F16, 1, Mix::kPure},
    {"bf16", DType::BF16, 32, Mix::kPure},   {"q8_0", DType::Q8_0, 7, Mix::kPure},
    {"q4_0", DType::Q4_0, 2, Mix::kSmall},   {"q4_1", DType::Q4_1, 3, Mix::kSmall},
    {"q5_0", DType::Q5_0, 8, Mix::kSmall},   {"q5_1", DType::Q5_1, 9, Mix::kSmall},
    {"q3_k_s", DType::Q3_K, 11, Mix::kSmall}, {"q3_k_m", DType::Q3_K, 12, Mix::kMedium},
    {"q4_k_s", DType::Q4_K, 14, Mix::kSmall}, {"q4_k_m", DType::Q4_K, 15, Mix::kMedium},
    {"q5_k_s", DType::Q5_K, 16, Mix::kSmall}, {"q5_k_m", DType::Q5_K, 17, Mix::kMedium},
    {"q6_k", DType::Q6_K, 18, Mix::kPure},
    {"iq4_nl", DType::IQ4_NL, 25, Mix::kSmall}, {"iq4_xs", DType::IQ4_XS, 30, Mix::kSmall},
    {"mxfp4", DType::MXFP4, 38, Mix::kSmall},   {"nvfp4", DType::NVFP4, 39, Mix::kSmall},
};

// Names that mean the same as a recipe above.
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"q3_k", "q3_k_m"}, {"q4_k", "q4_k_m"}, {"q5_k", "q5_k_m"}};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The layer of a "blk.N.xxx" name, or -1.
int layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int layer = -1;
  const char* begin = name.data() + 4;
  auto [ptr, ec] = std::from_chars(begin, name.data() + name.size(), layer);
  return ec == std::errc() && ptr != begin && *ptr == '.' ? layer : -1;
}

// The layers whose attention values and FFN down projection a medium mix
// keeps at 6 bits: the first and last eighth, and every third in between -
// the errors of the first and last layers reach the output least diluted.
bool gets_more_bits(int layer, int num_layers) {
  if (num_layers <= 0 || layer < 0) return false;
  const int eighth = num_layers / 8;
  return layer < eighth || layer >= num_layers - eighth || (layer - eighth) % 3 == 2;
}

// A type whose blocks fit a row of `row` elements, falling back from 256-element
// K blocks to the 32-element type of about the same bits, then to f16.
DType fit_row(DType type, std::int64_t row, std::string& why) {
  auto fits = [&](DType t) { return row % info(t).block_elems == 0; };
  if (fits(type)) return type;
  DType fallback = DType::F16;
  switch (type) {
    case DType::Q2_K:
    case DType::Q3_K: fallback = DType::IQ4_NL; break;
    case DType::Q4_K: fallback = DType::Q5_0; break;
    case DType::Q5_K: fallback = DType::Q5_1; break;
    case DType::Q6_K: fallback = DType::Q8_0; break;
    case DType::IQ4_XS: fallback = DType::IQ4_NL; break;
    case DType::NVFP4: fallback = DType::MXFP4; break;
    default: break;
  }
  if (!fits(fallback)) fallback = DType::F16;
  why = fmt::format("rows of {} are not whole {}-element blocks of {}", row, info(type).block_elems, name(type));
  return fallback;
}

}  // namespace

std::optional<QuantRecipe> parse_quant_recipe(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& [alias, target] : kAliases)
    if (lower == alias) lower = target;
  for (const QuantRecipe& r : kRecipes)
    if (r.name == lower) return r;
  return std::nullopt;
}

std::vector<std::string> quant_recipe_names() {
  std::vector<std::string> names;
  for (const QuantRecipe& r : kRecipes) names.push_back(r.name);
  return names;
}

std::vector<TensorQuantPlan> plan_quantization(const GgufFile& in, const QuantRecipe& recipe,
                                               const std::unordered_map<std::string, DType>& overrides) {
  std::vector<TensorToPlan> tensors;
  for (const GgufTensorInfo& t : in.tensors()) tensors.push_back({t.name, t.type, t.num_dims, t.shape[0]});
  return plan_quantization(tensors, recipe, overrides);
}

std::vector<TensorQuantPlan> plan_quantization(const std::vector<TensorToPlan>& tensors, const QuantRecipe& recipe,
                                               const std::unordered_map<std::string, DType>& overrides) {
  int num_layers = 0;
  bool tied = true;
  for (const TensorToPlan& t : tensors) {
    num_layers = std::max(num_layers, layer_of(t.name) + 1);
    if (t.name == "output.weight") tied = false;
  }
  const DType base = recipe.base;
  // The output projection turns every error into a wrong logit: at least 6 bits.
  const bool boost_output = !is_float(base) && base != DType::Q8_0 && base != DType::Q6_K;
  std::vector<TensorQuantPlan> plans;
  for (const TensorToPlan& t : tensors) {
    TensorQuantPlan p{t.name, t.type, t.type, ""};
    const bool matrix = t.num_dims >= 2 && ends_with(t.name, ".weight");
    // A router's error changes which experts run; routers are small.
    const bool router = ends_with(t.name, ".ffn_gate_inp.weight") || ends_with(t.name, ".ffn_gate_inp_shexp.weight");
    if (!matrix || router) {
      plans.push_back(std::move(p));  // norms, biases, tables and routers stay as they are
      continue;
    }
    DType to = base;
    const bool output = t.name == "output.weight" || (tied && t.name == "token_embd.weight");
    if (output && boost_output) {
      to = DType::Q6_K;
      p.why = tied ? "the tied embedding is also the output projection" : "the output projection";
    } else if (recipe.mix == Mix::kMedium &&
               (ends_with(t.name, ".attn_v.weight") || ends_with(t.name, ".ffn_down.weight") ||
                ends_with(t.name, ".ffn_down_exps.weight"))) {
      // A 3-bit medium mix gives these 4 bits everywhere and 5 in the
      // layers others give 6 (about as llama.cpp's q3_k_m does).
      if (gets_more_bits(layer_of(t.name), num_layers)) {
        to = base == DType::Q3_K ? DType::Q5_K : DType::Q6_K;
        p.why = fmt::format("{} mix: more bits in layer {}", recipe.name, layer_of(t.name));
      } else if (base == DType::Q3_K) {
        to = DType::Q4_K;
        p.why = fmt::format("{} mix: attention values and FFN down at 4 bits", recipe.name);
      }
    } else if (recipe.mix == Mix::kMedium && base == DType::Q3_K && ends_with(t.name, ".attn_output.weight")) {
      to = DType::Q4_K;
      p.why = fmt::format("{} mix: attention output at 4 bits", recipe.name);
    }
    if (auto it = overrides.find(t.name); it != overrides.end()) {
      to = it->second;
      p.why = "asked for by name";
    }
    std::string fit_why;
    const DType fitted = fit_row(to, t.row, fit_why);
    if (fitted != to) {
      if (p.why == "asked for by name")
        fail("{} cannot be {}: {}", t.name, name(to), fit_why);
      p.why = fit_why;
      to = fitted;
    }
    if (!info(t.type).dequantizable)
      fail("{} is {}, which folio cannot read back to quantize again", t.name, name(t.type));
    if (!can_quantize(to)) fail("folio cannot write {} (tensor {})", name(to), t.name);
    p.to = to;
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace folio
