// Qwen3-MoE: the qwen3 decoder (per-head Q/K RMSNorm, NeoX RoPE, no biases)
// whose FFN is a mixture of SwiGLU experts without a shared expert; the top-k
// router probabilities are renormalised (norm_topk_prob, GGUF
// expert_weights_norm; both models released set it).
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {

const ArchEntry kQwen3MoeArch{
    "qwen3moe",
    [](ModelConfig& c, const GgufFile& f) {
      c.rope.style = RopeStyle::kNeox;
      if (!c.is_moe()) fail("{}: a qwen3moe file needs qwen3moe.expert_count", f.path());
    },
    [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      DecoderFeatures features;
      features.qk_norm = true;
      return std::make_unique<DecoderModel>(c, features, w, be);
    },
    "Qwen3MoeForCausalLM",
    [](ModelConfig& c, const HfConfig& hf) {
      require_hf_silu(c, hf, "qwen3moe");
      refuse_hf_qwen_sliding_window(hf, "Qwen3-MoE");
      c.experts_from_hf(hf, /*norm_default=*/false);
      if (c.shared_expert_intermediate_size != 0) fail("{}: Qwen3-MoE has no shared expert", hf.source());
    },
};

}  // namespace folio
