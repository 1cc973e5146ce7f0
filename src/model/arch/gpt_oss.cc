// gpt-oss (20B, 120B): the pre-norm decoder with biases on Q, K, V and the
// output projection, a learned sink logit per head in every softmax,
// sliding-window attention (128 tokens) on every other layer from the first,
// NeoX RoPE with YaRN, and a mixture of experts whose router (with a bias)
// takes the top-k logits and a softmax over those k alone, and whose experts
// (with biases) run gpt-oss's clamped SwiGLU: gate <= 7, -7 <= up <= 7,
// (up + 1) * gate * sigmoid(1.702 gate). GGUF files (llama.cpp's `gpt-oss`)
// keep gate and up apart; Hugging Face checkpoints fuse them, interleaved,
// and store the released experts in MXFP4 blocks and scales, which
// gpt_oss_experts.cc takes into the GGUF layout without widening.
#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/decoder.h"
#include "model/arch/gpt_oss_experts.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"

namespace folio {
namespace {

void need_moe(const ModelConfig& c, const std::string& source) {
  if (!c.is_moe()) fail("{}: a gpt-oss model needs experts (expert_count / num_local_experts)", source);
  if (c.shared_expert_intermediate_size != 0) fail("{}: gpt-oss has no shared expert", source);
}

// llama.cpp's GGUF: the window, and which layers slide - every other one from
// layer 0 unless sliding_window_pattern says otherwise (a period n: layer l
// slides when l % n < n - 1; or one bool per layer).
void configure_gguf(ModelConfig& c, const GgufFile& f) {
  c.rope.style = RopeStyle::kNeox;
  need_moe(c, f.path());
  c.expert_weights_norm = true;  // the softmax over the chosen logits
  const std::int64_t window = f.get_int("gpt-oss.attention.sliding_window", 0);
  if (window <= 0) fail("{}: gpt-oss.attention.sliding_window {} must be positive", f.path(), window);
  std::vector<bool> slides(static_cast<std::size_t>(c.num_layers));
  const GgufValue* pattern = f.find("gpt-oss.attention.sliding_window_pattern");
  if (pattern != nullptr && pattern->type() == GgufType::kArray) {
    if (pattern->size() != slides.size())
      fail("{}: gpt-oss.attention.sliding_window_pattern has {} entries for {} layers", f.path(), pattern->size(),
           c.num_layers);
    const std::vector<std::int64_t> flags = pattern->ints("gpt-oss.attention.sliding_window_pattern");
    for (std::size_t l = 0; l < slides.size(); ++l) slides[l] = flags[l] != 0;
  } else {
    const std::int64_t period = f.get_int("gpt-oss.attention.sliding_window_pattern", 2);
    if (period <= 0) fail("{}: gpt-oss.attention.sliding_window_pattern {} must be positive", f.path(), period);
    for (std::size_t l = 0; l < slides.size(); ++l) slides[l] = static_cast<std::int64_t>(l) % period < period - 1;
  }
  for (std::size_t l = 0; l < slides.size(); ++l) c.sliding_window[l] = slides[l] ? window : 0;
}

void configure_hf(ModelConfig& c, const HfConfig& hf) {
  c.experts_from_hf(hf, /*norm_default=*/true);
  need_moe(c, hf.source());
  c.expert_weights_norm = true;  // GptOssTopKRouter: softmax over the top-k logits
  // The activation is the clamped SwiGLU whatever hidden_act says; its
  // constants are the released models' (llama.cpp's too).
  const double limit = hf.get_float("swiglu_limit", kSwigluClampedLimit);
  const double alpha = hf.get_float("swiglu_alpha", kSwigluClampedAlpha);
  if (static_cast<float>(limit) != kSwigluClampedLimit || static_cast<float>(alpha) != kSwigluClampedAlpha)
    fail("{}: swiglu_limit {} and swiglu_alpha {} are not gpt-oss's {} and {}, the ones folio runs", hf.source(),
         limit, alpha, kSwigluClampedLimit, kSwigluClampedAlpha);
  const std::int64_t window = hf.get_int("sliding_window", 128);
  if (window <= 0) fail("{}: sliding_window {} must be positive", hf.source(), window);
  const nlohmann::json* types = hf.find("layer_types");
  if (types != nullptr && (!types->is_array() || static_cast<std::int64_t>(types->size()) != c.num_layers))
    fail("{}: layer_types must list one type for each of the {} layers", hf.source(), c.num_layers);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    std::string type = l % 2 == 0 ? "sliding_attention" : "full_attention";  // GptOssConfig's default
    if (types != nullptr) {
      const nlohmann::json& t = (*types)[static_cast<std::size_t>(l)];
      type = t.is_string() ? t.get<std::string>() : t.dump();
    }
    if (type == "sliding_attention")
      c.sliding_window[static_cast<std::size_t>(l)] = window;
    else if (type != "full_attention")
      fail("{}: layer type {} is not supported (sliding_attention, full_attention are)", hf.source(), type);
  }
}

// GGUF names the norm before the FFN post_attention_norm.
void rename_ffn_norms(Weights& w, const ModelConfig& c) {
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::string post = fmt::format("blk.{}.post_attention_norm.weight", l);
    if (w.find(post) == nullptr) continue;  // a Hugging Face checkpoint's is ffn_norm already
    const Weights::RowPart part[] = {{fmt::format("blk.{}.ffn_norm.weight", l), c.hidden_size}};
    w.split_rows(post, part);
  }
}

}  // namespace

const ArchEntry kGptOssArch{
    .name = "gpt-oss",
    .configure = configure_gguf,
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      DecoderFeatures features;
      features.attention_sinks = true;
      features.activation = GluActivation::kSwigluClamped;
      return std::make_unique<DecoderModel>(c, features, w, be);
    },
    .hf_class = "GptOssForCausalLM",
    .configure_hf = configure_hf,
    .split_weights = rename_ffn_norms,
    .family = "gpt-oss",
    .hf_tensor = add_gpt_oss_expert_tensor,
};

}  // namespace folio
