// The llama family (Llama 2 and 3, SmolLM2, Mistral): the plain decoder with
// SiLU-gated FFN. GGUF llama files store Q/K rows permuted for the normal
// (adjacent-pair) RoPE ordering; Hugging Face checkpoints keep the rows as
// trained and rotate halves (NeoX), so the style follows the format.
#include "model/arch/decoder.h"
#include "model/arch/registry.h"

namespace folio {

const ArchEntry kLlamaArch{
    "llama",
    [](ModelConfig& c, const GgufFile&) { c.rope.style = RopeStyle::kNormal; },
    [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    "LlamaForCausalLM",
    [](ModelConfig& c, const HfConfig& hf) {
      require_hf_silu(c, hf, "llama");
      c.rope.style = RopeStyle::kNeox;
    },
};

}  // namespace folio
