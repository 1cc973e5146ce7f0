// Qwen2 / Qwen2.5: the llama decoder with biases on Q, K and V and NeoX
// (half-split) RoPE.
#include "model/arch/decoder.h"
#include "model/arch/registry.h"

namespace folio {

const ArchEntry kQwen2Arch{
    "qwen2",
    [](ModelConfig& c, const GgufFile&) {
      c.rope.style = RopeStyle::kNeox;
      c.attention_bias = true;
    },
    [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    "Qwen2ForCausalLM",
    [](ModelConfig& c, const HfConfig& hf) {
      require_hf_silu(c, hf, "qwen2");
      refuse_hf_qwen_sliding_window(hf, "Qwen2");
      c.attention_bias = true;
    },
};

}  // namespace folio
