// Qwen2 / Qwen2.5: the llama decoder with biases on Q, K and V and NeoX
// (half-split) RoPE.
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/hf_config.h"

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
      if (c.activation != Activation::kSilu) fail("{}: a qwen2 model needs hidden_act silu", hf.source());
      if (hf.get_bool("use_sliding_window", false))
        fail("{}: Qwen2's sliding window (use_sliding_window) is not supported", hf.source());
      c.attention_bias = true;
    },
};

}  // namespace folio
