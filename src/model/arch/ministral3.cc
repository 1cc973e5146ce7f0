// Ministral 3 (Ministral3ForCausalLM; GGUF "mistral3"): the llama decoder
// with YaRN and a query temperature - queries are multiplied by
// 1 + beta * ln(1 + floor(pos / original_context)) (rope_parameters'
// llama_4_scaling_beta; GGUF attention.temperature_scale, over
// rope.scaling.original_context_length), so attention sharpens past each
// multiple of the trained context. The released Ministral 3 and
// Mistral-Small 3.1 / 3.2 checkpoints are vision-language ones
// (Mistral3ForConditionalGeneration): their language model (text_config of
// model_type ministral3, or mistral: plain RoPE with a sliding window) is
// this one, the vision tower is left out. GGUF files keep llama's permuted
// Q/K rows.
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {
namespace {

void set_window(ModelConfig& c, std::int64_t window, const std::string& source) {
  if (window < 0) fail("{}: sliding_window {} is negative", source, window);
  c.sliding_window.assign(static_cast<std::size_t>(c.num_layers), window);
}

}  // namespace

const ArchEntry kMinistral3Arch{
    .name = "mistral3",
    .configure =
        [](ModelConfig& c, const GgufFile& f) {
          c.rope.style = RopeStyle::kNormal;
          c.rope.temperature_beta = static_cast<float>(f.get_float("mistral3.attention.temperature_scale", 0.0));
          if (c.rope.temperature_beta != 0.0f) c.rope.temperature_length = c.rope.original_context;
          set_window(c, f.get_int("mistral3.attention.sliding_window", 0), f.path());
          c.finish_rope(f.path());
        },
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    .hf_class = "Ministral3ForCausalLM",
    .configure_hf =
        [](ModelConfig& c, const HfConfig& hf) {
          require_hf_silu(c, hf, "ministral3");
          set_window(c, hf.get_int("sliding_window", 0), hf.source());
        },
    .family = "Ministral 3 / Mistral 3",
    .hf_vision_class = "Mistral3ForConditionalGeneration",
};

// Mistral (MistralForCausalLM: Mistral 7B, Nemo, Small 24B 2501, Ministral 8B
// 2410): the llama decoder with a sliding window on every layer where the
// config has one. Its GGUF files are llama ones.
const ArchEntry kMistralArch{
    .name = "mistral",
    .configure = [](ModelConfig& c, const GgufFile&) { c.rope.style = RopeStyle::kNormal; },
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    .hf_class = "MistralForCausalLM",
    .configure_hf =
        [](ModelConfig& c, const HfConfig& hf) {
          require_hf_silu(c, hf, "mistral");
          // MistralConfig's default window where config.json has no key (null: none).
          constexpr std::int64_t kDefaultWindow = 4096;
          set_window(c, hf.json().contains("sliding_window") ? hf.get_int("sliding_window", 0) : kDefaultWindow,
                     hf.source());
        },
    .family = "Mistral",
};

}  // namespace folio
