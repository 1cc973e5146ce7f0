// GLM-4 (the 0414 models, Glm4ForCausalLM): the decoder with Q/K/V biases,
// RoPE on the first half of each head only (partial_rotary_factor 0.5) over
// adjacent pairs, norms after attention and after the FFN as well as before
// them, and the FFN's gate and up projections fused into one weight (HF
// gate_up_proj, GGUF ffn_up of 2 x ffn rows: gate first), split at load.
#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/hf_config.h"

namespace folio {
namespace {

// ffn_up holds [gate; up]: 2 x ffn rows.
void split_gate_up(Weights& w, const ModelConfig& c) {
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::string up = fmt::format("blk.{}.ffn_up.weight", l);
    const Weights::RowPart parts[] = {{fmt::format("blk.{}.ffn_gate.weight", l), c.intermediate_size},
                                      {up, c.intermediate_size}};
    w.split_rows(up, parts);
  }
}

}  // namespace

const ArchEntry kGlm4Arch{
    .name = "glm4",
    .configure =
        [](ModelConfig& c, const GgufFile&) {
          c.rope.style = RopeStyle::kNormal;
          c.attention_bias = true;
        },
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      DecoderFeatures features;
      features.sandwich_norms = true;
      return std::make_unique<DecoderModel>(c, features, w, be);
    },
    .hf_class = "Glm4ForCausalLM",
    .configure_hf =
        [](ModelConfig& c, const HfConfig& hf) {
          require_hf_silu(c, hf, "glm4");
          c.rope.style = RopeStyle::kNormal;  // GLM rotates adjacent pairs in the rows as trained
          c.attention_bias = hf.get_bool("attention_bias", true);
          if (!hf.has("partial_rotary_factor") && !hf.has("rope_parameters.partial_rotary_factor")) {
            c.rope.dim = static_cast<int>(c.head_dim / 2);  // Glm4Config's default 0.5
            if (c.rope.dim % 2 != 0) fail("{}: half the head size {} is odd", hf.source(), c.head_dim);
          }
        },
    .split_weights = split_gate_up,
    .family = "GLM-4 (0414)",
};

}  // namespace folio
