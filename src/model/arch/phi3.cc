// Phi-3, Phi-3.5 and Phi-4(-mini) (Phi3ForCausalLM): the llama decoder with
// Q, K and V fused into one weight (HF qkv_proj, GGUF attn_qkv: [q; k; v]
// rows) and the FFN's gate and up fused into another (HF gate_up_proj, GGUF
// ffn_up of 2 x ffn rows: gate first), both split at load; NeoX RoPE, on a
// share of each head (Phi-4-mini: 0.75), with LongRoPE for the long-context
// variants: per-pair short factors up to original_max_position_embeddings
// and long ones past it, chosen by the engine's --max-model-len, and cos/sin
// scaled by sqrt(1 + ln(context / original) / ln(original)). A
// sliding_window in config.json (Phi-3-mini-4k: 2047) is run on every layer,
// as transformers runs it; llama.cpp leaves it off.
#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {
namespace {

void split_fused(Weights& w, const ModelConfig& c) {
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    if (w.find(n("attn_qkv.weight")) != nullptr) {
      const Weights::RowPart qkv[] = {
          {n("attn_q.weight"), c.q_dim()}, {n("attn_k.weight"), c.kv_dim()}, {n("attn_v.weight"), c.kv_dim()}};
      w.split_rows(n("attn_qkv.weight"), qkv);
    }
    const Tensor* up = w.find(n("ffn_up.weight"));
    if (up != nullptr && up->shape[0] == 2 * c.intermediate_size) {
      const Weights::RowPart gate_up[] = {{n("ffn_gate.weight"), c.intermediate_size},
                                          {n("ffn_up.weight"), c.intermediate_size}};
      w.split_rows(n("ffn_up.weight"), gate_up);
    }
  }
}

void set_window(ModelConfig& c, std::int64_t window, const std::string& source) {
  if (window < 0) fail("{}: sliding_window {} is negative", source, window);
  c.sliding_window.assign(static_cast<std::size_t>(c.num_layers), window);
}

}  // namespace

const ArchEntry kPhi3Arch{
    .name = "phi3",
    .configure =
        [](ModelConfig& c, const GgufFile& f) {
          c.rope.style = RopeStyle::kNeox;
          set_window(c, f.get_int("phi3.attention.sliding_window", 0), f.path());
        },
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    .hf_class = "Phi3ForCausalLM",
    .configure_hf =
        [](ModelConfig& c, const HfConfig& hf) {
          require_hf_silu(c, hf, "phi3");
          const std::string prefix = hf.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
          if (hf.get_string(prefix + ".rope_type", hf.get_string(prefix + ".type", "default")) == "yarn")
            fail("{}: a Phi-3 config calling its scaling yarn means longrope to transformers; write rope_type "
                 "longrope",
                 hf.source());
          set_window(c, hf.get_int("sliding_window", 0), hf.source());
        },
    .split_weights = split_fused,
    .family = "Phi-3 / Phi-3.5 / Phi-4",
};

}  // namespace folio
