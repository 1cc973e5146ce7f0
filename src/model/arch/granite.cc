// Granite 3.x, and Granite 4's dense models: the llama decoder with four
// multipliers - on the embeddings (embedding_multiplier, in place of
// nothing), on the attention scores (attention_multiplier, in place of
// 1/sqrt(head_dim)), on each block's output before it joins the residual
// stream (residual_multiplier), and a divisor of the logits
// (logits_scaling). GGUF files carry them as granite.embedding_scale,
// attention.scale, residual_scale and logit_scale, with llama's permuted Q/K
// rows (adjacent-pair RoPE).
#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {
namespace {

float positive(double v, const std::string& source, const char* key) {
  if (!(v > 0)) fail("{}: {} {} must be positive", source, key, v);
  return static_cast<float>(v);
}

void multipliers_from_hf(ModelConfig& c, const HfConfig& hf) {
  c.embedding_scale = positive(hf.get_float("embedding_multiplier", 1.0), hf.source(), "embedding_multiplier");
  c.residual_scale = positive(hf.get_float("residual_multiplier", 1.0), hf.source(), "residual_multiplier");
  c.attention_scale = positive(hf.get_float("attention_multiplier", 1.0), hf.source(), "attention_multiplier");
  c.logit_scale = 1.0f / positive(hf.get_float("logits_scaling", 1.0), hf.source(), "logits_scaling");
}

// Granite 4's dense checkpoints (GraniteMoeHybridForCausalLM with every
// layer "attention" and no experts): the FFN is the shared MLP, whose
// input_linear holds [gate; up] (2 x shared_intermediate_size rows).
void configure_granite4_hf(ModelConfig& c, const HfConfig& hf) {
  require_hf_silu(c, hf, "granitemoehybrid");
  c.rope.style = RopeStyle::kNeox;
  multipliers_from_hf(c, hf);
  if (hf.get_int("num_local_experts", 0) > 0)
    fail("{}: Granite 4's mixture of experts is not supported yet (its dense models are)", hf.source());
  const nlohmann::json* types = hf.find("layer_types");
  if (types == nullptr) types = hf.find("layers_block_type");
  if (types == nullptr || !types->is_array() || static_cast<std::int64_t>(types->size()) != c.num_layers)
    fail("{}: layer_types must list one type for each of the {} layers", hf.source(), c.num_layers);
  // "attention" in the hub's configs; transformers 5 saves it as "full_attention" (and Mamba as
  // "linear_attention").
  for (const nlohmann::json& t : *types)
    if (!t.is_string() || (t.get<std::string>() != "attention" && t.get<std::string>() != "full_attention"))
      fail("{}: layer type {} is not supported: Granite 4's hybrid (Mamba) layers are not run yet, its dense "
           "models (every layer attention) are",
           hf.source(), t.dump());
  c.intermediate_size = hf.need_count("shared_intermediate_size");
  // Without position_embedding_type "rope" the layers rotate nothing (NoPE).
  if (hf.get_string("position_embedding_type", "") != "rope")
    c.rope_skipped.assign(static_cast<std::size_t>(c.num_layers), true);
}

void split_shared_mlp(Weights& w, const ModelConfig& c) {
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::string up = fmt::format("blk.{}.ffn_up.weight", l);
    const Tensor* t = w.find(up);
    if (t == nullptr || t->shape[0] != 2 * c.intermediate_size) continue;  // GGUF files hold them apart
    const Weights::RowPart parts[] = {{fmt::format("blk.{}.ffn_gate.weight", l), c.intermediate_size},
                                      {up, c.intermediate_size}};
    w.split_rows(up, parts);
  }
}

}  // namespace

const ArchEntry kGraniteArch{
    .name = "granite",
    .configure =
        [](ModelConfig& c, const GgufFile& f) {
          c.rope.style = RopeStyle::kNormal;
          c.embedding_scale = positive(f.get_float("granite.embedding_scale", 1.0), f.path(), "embedding_scale");
          c.residual_scale = positive(f.get_float("granite.residual_scale", 1.0), f.path(), "residual_scale");
          if (f.find("granite.attention.scale") != nullptr)
            c.attention_scale = positive(f.get_float("granite.attention.scale", 0.0), f.path(), "attention.scale");
          c.logit_scale = 1.0f / positive(f.get_float("granite.logit_scale", 1.0), f.path(), "logit_scale");
        },
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    .hf_class = "GraniteForCausalLM",
    .configure_hf =
        [](ModelConfig& c, const HfConfig& hf) {
          require_hf_silu(c, hf, "granite");
          c.rope.style = RopeStyle::kNeox;
          multipliers_from_hf(c, hf);
        },
    .family = "Granite 3.x",
};

// Granite 4 dense (GraniteMoeHybridForCausalLM, every layer attention):
// Granite's multipliers, the shared MLP as the FFN, RoPE or none. llama.cpp
// converts such checkpoints to "granite" files (read by the entry above);
// its "granitehybrid" files hold Mamba layers, which folio does not run yet.
const ArchEntry kGranite4Arch{
    .name = "granitehybrid",
    .configure =
        [](ModelConfig&, const GgufFile& f) {
          fail("{}: Granite 4's hybrid (Mamba) layers are not supported yet; its dense models convert to "
               "granite files, which are",
               f.path());
        },
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    .hf_class = "GraniteMoeHybridForCausalLM",
    .configure_hf = configure_granite4_hf,
    .split_weights = split_shared_mlp,
    .family = "Granite 4 (dense)",
};

}  // namespace folio
