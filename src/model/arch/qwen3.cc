// Qwen3: the llama decoder with per-head RMSNorm of Q and K (before RoPE), no
// Q/K/V biases, NeoX RoPE, and a head size of its own (heads x head_dim need
// not equal the hidden size).
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/hf_config.h"

namespace folio {

const ArchEntry kQwen3Arch{
    "qwen3",
    [](ModelConfig& c, const GgufFile&) { c.rope.style = RopeStyle::kNeox; },
    [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      DecoderFeatures features;
      features.qk_norm = true;
      return std::make_unique<DecoderModel>(c, features, w, be);
    },
    "Qwen3ForCausalLM",
    [](ModelConfig& c, const HfConfig& hf) {
      if (c.activation != Activation::kSilu) fail("{}: a qwen3 model needs hidden_act silu", hf.source());
      if (hf.get_bool("use_sliding_window", false))
        fail("{}: Qwen3's sliding window (use_sliding_window) is not supported", hf.source());
    },
};

}  // namespace folio
