// SmolLM3: the llama decoder in which every fourth layer (3, 7, 11, ...)
// rotates nothing (NoPE). config.json lists the layers that rotate
// (no_rope_layers: 1 rotates, 0 does not) or gives the interval
// (no_rope_layer_interval); llama.cpp's GGUF files carry neither and it
// hard-codes every fourth, as folio does for them. GGUF files keep llama's
// permuted Q/K rows (adjacent-pair RoPE).
#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/hf_config.h"

namespace folio {
namespace {

constexpr std::int64_t kNoRopeEvery = 4;

void configure_hf(ModelConfig& c, const HfConfig& hf) {
  require_hf_silu(c, hf, "smollm3");
  if (hf.get_bool("use_sliding_window", false))
    fail("{}: SmolLM3's sliding window (use_sliding_window) is not supported", hf.source());
  c.rope_skipped.assign(static_cast<std::size_t>(c.num_layers), false);
  if (const nlohmann::json* list = hf.find("no_rope_layers")) {
    if (!list->is_array() || static_cast<std::int64_t>(list->size()) != c.num_layers)
      fail("{}: no_rope_layers must hold one entry for each of the {} layers", hf.source(), c.num_layers);
    for (std::size_t l = 0; l < list->size(); ++l) {
      const nlohmann::json& v = (*list)[l];
      if (!v.is_number_integer() || (v.get<int>() != 0 && v.get<int>() != 1))
        fail("{}: no_rope_layers[{}] is {}; expected 1 (rotates) or 0 (does not)", hf.source(), l, v.dump());
      c.rope_skipped[l] = v.get<int>() == 0;
    }
  } else {
    const std::int64_t every = hf.get_int("no_rope_layer_interval", kNoRopeEvery);
    if (every <= 0) fail("{}: no_rope_layer_interval {} must be positive", hf.source(), every);
    for (std::int64_t l = 0; l < c.num_layers; ++l) c.rope_skipped[static_cast<std::size_t>(l)] = (l + 1) % every == 0;
  }
}

}  // namespace

const ArchEntry kSmolLM3Arch{
    .name = "smollm3",
    .configure =
        [](ModelConfig& c, const GgufFile&) {
          c.rope.style = RopeStyle::kNormal;
          c.rope_skipped.assign(static_cast<std::size_t>(c.num_layers), false);
          for (std::int64_t l = 0; l < c.num_layers; ++l)
            c.rope_skipped[static_cast<std::size_t>(l)] = (l + 1) % kNoRopeEvery == 0;
        },
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<DecoderModel>(c, DecoderFeatures{}, w, be);
    },
    .hf_class = "SmolLM3ForCausalLM",
    .configure_hf = configure_hf,
    .family = "SmolLM3",
};

}  // namespace folio
