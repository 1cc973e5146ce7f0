// Gemma 3: the decoder with embeddings scaled by sqrt(hidden), per-head
// RMSNorm of Q and K, norms after attention and after the FFN as well as
// before them, a GELU-gated FFN, NeoX RoPE, and sliding-window attention on
// five layers of every six (the sixth attends globally). The local layers
// rotate with base 10,000, the global ones with the file's rope.freq_base.
// GGUF files store every norm weight as HF's (1 + w), so they multiply as
// they are.
#include "model/arch/decoder.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"

namespace folio {
namespace {

constexpr std::int64_t kGlobalEvery = 6;   // layers 5, 11, 17, ... attend globally
constexpr float kLocalRopeBase = 10000.0f;

}  // namespace

const ArchEntry kGemma3Arch{
    "gemma3",
    [](ModelConfig& c, const GgufFile& f) {
      c.rope.style = RopeStyle::kNeox;
      const std::int64_t window = f.get_int("gemma3.attention.sliding_window", 0);
      for (std::int64_t l = 0; l < c.num_layers; ++l)
        c.sliding_window[static_cast<std::size_t>(l)] = (l + 1) % kGlobalEvery == 0 ? 0 : window;
    },
    [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      DecoderFeatures features;
      features.qk_norm = true;
      features.sandwich_norms = true;
      features.scale_embeddings = true;
      features.activation = GluActivation::kGeluTanh;
      features.sliding_window_rope_base = kLocalRopeBase;
      return std::make_unique<DecoderModel>(c, features, w, be);
    },
};

}  // namespace folio
