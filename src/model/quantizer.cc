#include "model/quantizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "model/awq.h"
#include "model/gguf_writer.h"
#include "tensor/code_layout.h"
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

// The scales AWQ gives tensor `name` in the map `which` of o, or nullptr.
const std::vector<float>* find_scales(const AwqScales* awq, std::unordered_map<std::string, std::vector<float>> AwqScales::*which,
                                      const std::string& name) {
  if (awq == nullptr) return nullptr;
  auto it = (awq->*which).find(name);
  return it == (awq->*which).end() ? nullptr : &it->second;
}

// The covariance GPTQ quantizes t with under o, or nullptr where t takes
// the block-by-block encoder.
const InputCovariance* gptq_covariance(const QuantizeOptions& o, const GgufTensorInfo& t, const TensorQuantPlan& p) {
  if (o.method != QuantMethod::kGptq || o.importance == nullptr || t.num_dims != 2 || t.name == "token_embd.weight" ||
      code_layout(p.to) == nullptr)
    return nullptr;
  auto it = o.importance->covariances.find(t.name);
  if (it == o.importance->covariances.end()) return nullptr;
  if (it->second->cols != t.shape[0])
    fail("the input covariance of {} has {} columns; the tensor has {}", t.name, it->second->cols, t.shape[0]);
  return it->second.get();
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

std::vector<TensorQuantPlan> plan_quantization(const GgufFile& in, const QuantizeOptions& o) {
  std::vector<TensorToPlan> tensors;
  for (const GgufTensorInfo& t : in.tensors()) tensors.push_back({t.name, t.type, t.num_dims, t.shape[0]});
  return plan_quantization(tensors, o);
}

std::vector<TensorQuantPlan> plan_quantization(const std::vector<TensorToPlan>& tensors, const QuantizeOptions& o) {
  int num_layers = 0;
  bool tied = true;
  for (const TensorToPlan& t : tensors) {
    num_layers = std::max(num_layers, layer_of(t.name) + 1);
    if (t.name == "output.weight") tied = false;
  }
  const DType base = o.recipe.base;
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
    } else if (o.recipe.mix == Mix::kMedium &&
               (ends_with(t.name, ".attn_v.weight") || ends_with(t.name, ".ffn_down.weight") ||
                ends_with(t.name, ".ffn_down_exps.weight"))) {
      // A 3-bit medium mix gives these 4 bits everywhere and 5 in the
      // layers others give 6 (about as llama.cpp's q3_k_m does).
      if (gets_more_bits(layer_of(t.name), num_layers)) {
        to = base == DType::Q3_K ? DType::Q5_K : DType::Q6_K;
        p.why = fmt::format("{} mix: more bits in layer {}", o.recipe.name, layer_of(t.name));
      } else if (base == DType::Q3_K) {
        to = DType::Q4_K;
        p.why = fmt::format("{} mix: attention values and FFN down at 4 bits", o.recipe.name);
      }
    } else if (o.recipe.mix == Mix::kMedium && base == DType::Q3_K && ends_with(t.name, ".attn_output.weight")) {
      to = DType::Q4_K;
      p.why = fmt::format("{} mix: attention output at 4 bits", o.recipe.name);
    }
    if (auto it = o.overrides.find(t.name); it != o.overrides.end()) {
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

QuantizeSummary quantize_gguf(const GgufFile& in, const std::string& out_path, const QuantizeOptions& o,
                              const QuantizeProgress& progress) {
  const std::vector<TensorQuantPlan> plans = plan_quantization(in, o);
  GgufWriter writer;
  for (const auto& [key, value] : in.metadata()) writer.set(key, GgufMetaValue::from(value));
  writer.set("general.file_type", GgufMetaValue::u32(o.recipe.file_type));
  writer.set("general.quantization_version", GgufMetaValue::u32(2));
  const auto& tensors = in.tensors();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    writer.add_tensor(t.name, plans[i].to, std::span<const std::int64_t>(t.shape.data(), static_cast<std::size_t>(t.num_dims)));
  }
  writer.begin(out_path);

  ThreadPool pool(o.threads);
  QuantizeSummary summary;
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    const TensorQuantPlan& p = plans[i];
    summary.input_bytes += t.size_bytes;
    summary.parameters += t.num_elements;
    const std::vector<float>* column_scales = find_scales(o.awq, &AwqScales::columns, t.name);
    const std::vector<float>* row_scales = find_scales(o.awq, &AwqScales::rows, t.name);
    if (column_scales != nullptr || row_scales != nullptr) ++summary.awq_scaled;
    if (p.to == p.from && row_scales != nullptr) {
      // A norm AWQ folded 1/s into.
      FOLIO_CHECK(t.type == DType::F32 && t.num_dims == 1 && static_cast<std::int64_t>(row_scales->size()) == t.shape[0]);
      std::vector<float> v(row_scales->size());
      std::memcpy(v.data(), t.data, t.size_bytes);
      for (std::size_t c = 0; c < v.size(); ++c) v[c] *= (*row_scales)[c];
      writer.write_tensor_data(t.name, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(v.data()), t.size_bytes));
      summary.output_bytes += t.size_bytes;
      if (progress) progress(i, tensors.size(), p);
      continue;
    }
    if (p.to == p.from) {
      writer.write_tensor_data(t.name, std::span<const std::uint8_t>(t.data, t.size_bytes));
      summary.output_bytes += t.size_bytes;
      if (progress) progress(i, tensors.size(), p);
      continue;
    }
    const std::int64_t cols = t.shape[0];
    const std::int64_t rows = t.rows();
    const float* importance = nullptr;
    if (o.importance != nullptr) {
      if (auto it = o.importance->columns.find(t.name); it != o.importance->columns.end()) {
        if (static_cast<std::int64_t>(it->second.size()) != cols)
          fail("the importance of {} has {} columns; the tensor has {}", t.name, it->second.size(), cols);
        importance = it->second.data();
        ++summary.weighted;
      }
    }
    // Uniform importance: the least squared error.
    std::vector<float> uniform;
    if (importance == nullptr && !o.reference_scales) {
      uniform.assign(static_cast<std::size_t>(cols), 1.0f);
      importance = uniform.data();
    }
    // Columns AWQ multiplied by s meet inputs divided by s.
    std::vector<float> scaled_importance;
    if (column_scales != nullptr) {
      FOLIO_CHECK(static_cast<std::int64_t>(column_scales->size()) == cols);
      scaled_importance.resize(column_scales->size());
      for (std::size_t c = 0; c < scaled_importance.size(); ++c)
        scaled_importance[c] = (importance != nullptr ? importance[c] : 1.0f) / ((*column_scales)[c] * (*column_scales)[c]);
      importance = scaled_importance.data();
    }
    FOLIO_CHECK(row_scales == nullptr || static_cast<std::int64_t>(row_scales->size()) == rows);
    // Row r of the weight as it is encoded: dequantized, AWQ's scales applied.
    auto read_row = [&](std::int64_t r, float* row) {
      dequantize_row(p.from, t.data + static_cast<std::size_t>(r) * static_cast<std::size_t>(row_bytes(p.from, cols)), row, cols);
      if (column_scales != nullptr)
        for (std::int64_t c = 0; c < cols; ++c) row[c] *= (*column_scales)[static_cast<std::size_t>(c)];
      if (row_scales != nullptr)
        for (std::int64_t c = 0; c < cols; ++c) row[c] *= (*row_scales)[static_cast<std::size_t>(r)];
    };
    if (!is_float(p.from)) ++summary.requantized;
    const std::size_t out_row = static_cast<std::size_t>(row_bytes(p.to, cols));
    const InputCovariance* h = gptq_covariance(o, t, p);
    if (h != nullptr && h->rows < h->cols) {
      if (summary.gptq_short++ == 0) {
        summary.gptq_short_example = t.name;
        summary.gptq_short_rows = h->rows;
        summary.gptq_short_cols = h->cols;
      }
      h = nullptr;
    }
    if (h != nullptr) {
      // The whole tensor at once: GPTQ's error reaches every later column.
      std::vector<float> w(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
      pool.parallel_for(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) read_row(r, w.data() + static_cast<std::size_t>(r * cols));
      }, 8);
      // Columns AWQ multiplied by s meet inputs divided by s.
      InputCovariance scaled;
      if (column_scales != nullptr) {
        scaled = *h;
        const auto& sc = *column_scales;
        for (std::size_t a = 0; a < sc.size(); ++a)
          for (std::size_t b = a; b < sc.size(); ++b) scaled.sum[a * sc.size() + b] /= sc[a] * sc[b];
        h = &scaled;
      }
      out.resize(static_cast<std::size_t>(rows) * out_row);
      gptq_quantize(p.to, w.data(), rows, cols, *h, out.data(), pool, o.gptq);
      writer.write_tensor_data(t.name, out);
      ++summary.gptq;
      summary.output_bytes += static_cast<std::uint64_t>(rows) * out_row;
      if (progress) progress(i, tensors.size(), p);
      continue;
    }
    // Rows in pieces of about 16 MiB of output, so memory stays bounded.
    const std::int64_t piece = std::max<std::int64_t>(1, static_cast<std::int64_t>((16u << 20) / std::max<std::size_t>(out_row, 1)));
    for (std::int64_t first = 0; first < rows; first += piece) {
      const std::int64_t count = std::min(piece, rows - first);
      out.resize(static_cast<std::size_t>(count) * out_row);
      pool.parallel_for(count, [&](std::int64_t begin, std::int64_t end) {
        std::vector<float> row(static_cast<std::size_t>(cols));
        for (std::int64_t r = begin; r < end; ++r) {
          read_row(first + r, row.data());
          quantize_row_weighted(p.to, row.data(), importance, out.data() + static_cast<std::size_t>(r) * out_row, cols);
        }
      }, 8);
      writer.write_tensor_data(t.name, out);
    }
    summary.output_bytes += static_cast<std::uint64_t>(rows) * out_row;
    if (progress) progress(i, tensors.size(), p);
  }
  writer.finish();
  return summary;
}

}  // namespace folio
