// Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B): the qwen2 decoder (Q/K/V biases,
// NeoX RoPE) whose FFN is a mixture of SwiGLU experts whose top-k router
// probabilities are not renormalised (norm_topk_prob false), plus a shared
// expert whose output is scaled by sigmoid(its gate . x) and added.
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {

const ArchEntry kQwen2MoeArch{
    "qwen2moe",
    [](ModelConfig& c, const GgufFile& f) {
      c.rope.style = RopeStyle::kNeox;
      c.attention_bias = true;
      if (!c.is_moe()) fail("{}: a qwen2moe file needs qwen2moe.expert_count", f.path());
      c.expert_weights_norm = f.get_bool("qwen2moe.expert_weights_norm", false);
    },
    [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    "Qwen2MoeForCausalLM",
    [](ModelConfig& c, const HfConfig& hf) {
      require_hf_silu(c, hf, "qwen2moe");
      refuse_hf_qwen_sliding_window(hf, "Qwen2-MoE");
      c.attention_bias = hf.get_bool("qkv_bias", true);
      c.experts_from_hf(hf, /*norm_default=*/false);
    },
};

}  // namespace folio
