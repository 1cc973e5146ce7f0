// Gemma 2: Gemma 3's layout without the per-head Q/K norms - embeddings
// scaled by sqrt(hidden), norms before and after attention and the FFN,
// GeGLU, NeoX RoPE - with sliding-window attention on every other layer (0,
// 2, 4, ...; the odd ones attend globally), attention scores soft-capped
// (50) and the final logits too (30), and its own attention scale,
// 1/sqrt(query_pre_attn_scalar). A GGUF file cannot carry that scalar:
// llama.cpp derives it from the size (hidden / heads for the 27B, whose 46
// layers tell it apart, the head size otherwise), and so does folio for
// those files. GGUF files store every norm weight as HF's (1 + w); Hugging
// Face checkpoints store w, and the loader adds the one.
#include <cmath>

#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {
namespace {

constexpr std::int64_t kGemma2DefaultWindow = 4096;  // llama.cpp's and transformers' default
constexpr std::int64_t kGemma2Layers27B = 46;

// A soft-cap of config.json: its value, transformers' default when the key
// is absent, none (0) when it is null.
float hf_softcap(const HfConfig& hf, const char* key, double absent) {
  if (!hf.json().contains(key)) return static_cast<float>(absent);
  const double v = hf.get_float(key, 0.0);
  if (v < 0) fail("{}: {} {} is negative", hf.source(), key, v);
  return static_cast<float>(v);
}

void configure_hf(ModelConfig& c, const HfConfig& hf) {
  if (c.activation != Activation::kGeluTanh)
    fail("{}: a gemma2 model needs hidden_activation gelu_pytorch_tanh", hf.source());
  c.rope.style = RopeStyle::kNeox;
  const std::int64_t window = hf.get_int("sliding_window", kGemma2DefaultWindow);
  if (window <= 0) fail("{}: sliding_window {} must be positive", hf.source(), window);
  if (const nlohmann::json* types = hf.find("layer_types")) {
    if (!types->is_array() || static_cast<std::int64_t>(types->size()) != c.num_layers)
      fail("{}: layer_types must list one type for each of the {} layers", hf.source(), c.num_layers);
    for (std::int64_t l = 0; l < c.num_layers; ++l) {
      const nlohmann::json& t = (*types)[static_cast<std::size_t>(l)];
      const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
      if (type == "sliding_attention")
        c.sliding_window[static_cast<std::size_t>(l)] = window;
      else if (type != "full_attention")
        fail("{}: layer type {} is not supported (sliding_attention, full_attention are)", hf.source(), type);
    }
  } else {
    for (std::int64_t l = 0; l < c.num_layers; ++l) c.sliding_window[static_cast<std::size_t>(l)] = l % 2 == 0 ? window : 0;
  }
  const double scalar = hf.get_float("query_pre_attn_scalar", 256.0);
  if (!(scalar > 0)) fail("{}: query_pre_attn_scalar {} must be positive", hf.source(), scalar);
  c.attention_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  c.attention_softcap = hf_softcap(hf, "attn_logit_softcapping", 50.0);
  c.final_logit_softcap = hf_softcap(hf, "final_logit_softcapping", 30.0);
}

void configure_gguf(ModelConfig& c, const GgufFile& f) {
  c.rope.style = RopeStyle::kNeox;
  const std::int64_t window = f.get_int("gemma2.attention.sliding_window", kGemma2DefaultWindow);
  if (window <= 0) fail("{}: gemma2.attention.sliding_window {} must be positive", f.path(), window);
  for (std::int64_t l = 0; l < c.num_layers; ++l) c.sliding_window[static_cast<std::size_t>(l)] = l % 2 == 0 ? window : 0;
  c.attention_softcap = static_cast<float>(f.get_float("gemma2.attn_logit_softcapping", 50.0));
  c.final_logit_softcap = static_cast<float>(f.get_float("gemma2.final_logit_softcapping", 30.0));
  const double scalar = c.num_layers == kGemma2Layers27B ? static_cast<double>(c.hidden_size / c.num_heads)
                                                           : static_cast<double>(c.head_dim);
  c.attention_scale = static_cast<float>(1.0 / std::sqrt(scalar));
}

}  // namespace

const ArchEntry kGemma2Arch{
    .name = "gemma2",
    .configure = configure_gguf,
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      DecoderFeatures features;
      features.sandwich_norms = true;
      features.scale_embeddings = true;
      features.activation = GluActivation::kGeluTanh;
      return std::make_unique<DecoderModel>(c, features, w, be);
    },
    .hf_class = "Gemma2ForCausalLM",
    .configure_hf = configure_hf,
    .hf_gemma_norms = true,
    .family = "Gemma 2",
};

}  // namespace folio
