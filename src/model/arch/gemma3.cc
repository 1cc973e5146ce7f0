// Gemma 3: the decoder with embeddings scaled by sqrt(hidden), per-head
// RMSNorm of Q and K, norms after attention and after the FFN as well as
// before them, a GELU-gated FFN, NeoX RoPE, and sliding-window attention on
// five layers of every six (the sixth attends globally). The local layers
// rotate with base 10,000, the global ones with the file's rope.freq_base.
// GGUF files store every norm weight as HF's (1 + w), so they multiply as
// they are; Hugging Face checkpoints store w, and the loader adds the one.
#include <cmath>

#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {
namespace {

constexpr std::int64_t kGlobalEvery = 6;   // layers 5, 11, 17, ... attend globally
constexpr float kLocalRopeBase = 10000.0f;

// config.json: which layers slide (layer_types, or every layer but each
// sliding_window_pattern-th), the two RoPE bases, the attention scale.
void configure_hf(ModelConfig& c, const HfConfig& hf) {
  if (c.activation != Activation::kGeluTanh)
    fail("{}: a gemma3 model needs hidden_activation gelu_pytorch_tanh", hf.source());
  if (hf.has("attn_logit_softcapping") || hf.has("final_logit_softcapping"))
    fail("{}: logit soft-capping is not supported for gemma3", hf.source());
  c.rope.style = RopeStyle::kNeox;
  const std::int64_t window = hf.get_int("sliding_window", 0);
  if (window < 0) fail("{}: sliding_window {} is negative", hf.source(), window);
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
    const std::int64_t every = hf.get_int("sliding_window_pattern", kGlobalEvery);
    if (every <= 0) fail("{}: sliding_window_pattern {} must be positive", hf.source(), every);
    for (std::int64_t l = 0; l < c.num_layers; ++l)
      c.sliding_window[static_cast<std::size_t>(l)] = (l + 1) % every == 0 ? 0 : window;
  }
  // transformers 5 writes a RoPE object per layer type, earlier ones
  // rope_theta, rope_scaling and rope_local_base_freq.
  double local_base = hf.get_float("rope_local_base_freq", kLocalRopeBase);
  if (hf.has("rope_parameters.full_attention")) {
    c.rope.base = static_cast<float>(hf.get_float("rope_parameters.full_attention.rope_theta", 1000000.0));
    c.rope_scaling_from_hf(hf, "rope_parameters.full_attention");
    local_base = hf.get_float("rope_parameters.sliding_attention.rope_theta", local_base);
    if (hf.get_string("rope_parameters.sliding_attention.rope_type", "default") != "default")
      fail("{}: RoPE scaling on the sliding-window layers is not supported", hf.source());
  }
  if (static_cast<float>(local_base) != kLocalRopeBase)
    fail("{}: the sliding-window layers' RoPE base {} is not supported (folio's gemma3 uses {})", hf.source(),
         local_base, kLocalRopeBase);
  const double scalar = hf.get_float("query_pre_attn_scalar", static_cast<double>(c.head_dim));
  if (!(scalar > 0)) fail("{}: query_pre_attn_scalar {} must be positive", hf.source(), scalar);
  c.attention_scale = static_cast<float>(1.0 / std::sqrt(scalar));
}

}  // namespace

const ArchEntry kGemma3Arch{
    "gemma3",
    [](ModelConfig& c, const GgufFile& f) {
      c.rope.style = RopeStyle::kNeox;
      const std::int64_t window = f.get_int("gemma3.attention.sliding_window", 0);
      for (std::int64_t l = 0; l < c.num_layers; ++l)
        c.sliding_window[static_cast<std::size_t>(l)] = (l + 1) % kGlobalEvery == 0 ? 0 : window;
    },
    [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      DecoderFeatures features;
      features.qk_norm = true;
      features.sandwich_norms = true;
      features.scale_embeddings = true;
      features.activation = GluActivation::kGeluTanh;
      features.sliding_window_rope_base = kLocalRopeBase;
      return std::make_unique<DecoderModel>(c, features, w, be);
    },
    "Gemma3ForCausalLM",
    configure_hf,
    /*hf_gemma_norms=*/true,
};

}  // namespace folio
