// Qwen3: the llama decoder with per-head RMSNorm of Q and K (before RoPE), no
// Q/K/V biases, NeoX RoPE, and a head size of its own (heads x head_dim need
// not equal the hidden size).
#include "model/arch/decoder.h"
#include "model/arch/registry.h"

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
      require_hf_silu(c, hf, "qwen3");
      refuse_hf_qwen_sliding_window(hf, "Qwen3");
    },
};

}  // namespace folio
