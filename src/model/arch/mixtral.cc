// Mixtral: the llama decoder whose FFN is a mixture of SwiGLU experts, the
// top-k of them per token weighted by their renormalised router
// probabilities. GGUF files call it "llama" with an expert count (llama.cc
// loads them; the decoder sees the experts in the config); this entry reads
// Hugging Face's MixtralForCausalLM.
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/hf_config.h"

namespace folio {

const ArchEntry kMixtralArch{
    "mixtral",
    [](ModelConfig& c, const GgufFile&) { c.rope.style = RopeStyle::kNormal; },
    [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      if (!c.is_moe()) fail("model {}: a mixtral model needs experts", c.name);
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    "MixtralForCausalLM",
    [](ModelConfig& c, const HfConfig& hf) {
      require_hf_silu(c, hf, "mixtral");
      c.experts_from_hf(hf, /*norm_default=*/true);
      if (!hf.get_bool("norm_topk_prob", true)) fail("{}: Mixtral renormalises its top-k weights", hf.source());
      const std::int64_t window = hf.get_int("sliding_window", 0);
      if (window < 0) fail("{}: sliding_window {} is negative", hf.source(), window);
      c.sliding_window.assign(static_cast<std::size_t>(c.num_layers), window);
    },
};

}  // namespace folio
