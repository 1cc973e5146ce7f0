// Granite 3.x (dense): the llama decoder with four multipliers - on the
// embeddings (embedding_multiplier, in place of nothing), on the attention
// scores (attention_multiplier, in place of 1/sqrt(head_dim)), on each
// block's output before it joins the residual stream (residual_multiplier),
// and a divisor of the logits (logits_scaling). GGUF files carry them as
// granite.embedding_scale, attention.scale, residual_scale and logit_scale,
// with llama's permuted Q/K rows (adjacent-pair RoPE).
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
          c.embedding_scale = positive(hf.get_float("embedding_multiplier", 1.0), hf.source(), "embedding_multiplier");
          c.residual_scale = positive(hf.get_float("residual_multiplier", 1.0), hf.source(), "residual_multiplier");
          c.attention_scale =
              positive(hf.get_float("attention_multiplier", 1.0), hf.source(), "attention_multiplier");
          c.logit_scale = 1.0f / positive(hf.get_float("logits_scaling", 1.0), hf.source(), "logits_scaling");
        },
    .family = "Granite 3.x",
};

}  // namespace folio
