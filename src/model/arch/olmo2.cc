// OLMo 2 (Olmo2ForCausalLM): a decoder whose norms come after each sublayer
// only (post_attention_layernorm and post_feedforward_layernorm on the
// sublayer's output, none before: attention and the FFN read the residual
// stream itself), with RMSNorm of Q and K over all their heads at once
// (weights of heads x head_dim), NeoX RoPE, untied embeddings. GGUF files
// ("olmo2") name the norms post_attention_norm and post_ffw_norm.
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {

const ArchEntry kOlmo2Arch{
    .name = "olmo2",
    .configure =
        [](ModelConfig& c, const GgufFile& f) {
          c.rope.style = RopeStyle::kNeox;
          if (f.get_int("olmo2.attention.sliding_window", 0) > 0)
            fail("{}: OLMo 3's sliding window is not supported yet", f.path());
        },
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      DecoderFeatures features;
      features.qk_norm = true;
      features.qk_norm_whole = true;
      features.pre_norms = false;
      features.sandwich_norms = true;
      return std::make_unique<DecoderModel>(c, features, w, be);
    },
    .hf_class = "Olmo2ForCausalLM",
    .configure_hf =
        [](ModelConfig& c, const HfConfig& hf) {
          require_hf_silu(c, hf, "olmo2");
          if (hf.get_int("sliding_window", 0) > 0)
            fail("{}: OLMo 3's sliding window is not supported yet", hf.source());
        },
    .hf_post_attention_norm = true,
    .family = "OLMo 2",
};

}  // namespace folio
