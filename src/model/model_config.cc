#include "model/model_config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/hf_config.h"
#include "model/rotary.h"

namespace folio {

std::int64_t ModelConfig::kv_bytes_per_token(double bytes_per_number) const {
  return static_cast<std::int64_t>(std::llround(
      static_cast<double>((num_layers - num_recurrent_layers()) * num_kv_heads * (head_dim + value_head_dim)) *
      bytes_per_number));
}

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.architecture = f.get_string("general.architecture", "");
  if (c.architecture.empty()) fail("{} has no general.architecture key", f.path());
  c.name = f.get_string("general.name", c.architecture);
  const std::string a = c.architecture + ".";

  auto need = [&](const std::string& key) {
    std::int64_t v = f.get(key).as_int(key);
    if (v <= 0 || v > (std::int64_t{1} << 32)) fail("{}: {} = {} is out of range", f.path(), key, v);
    return v;
  };
  c.num_layers = need(a + "block_count");
  c.hidden_size = need(a + "embedding_length");
  c.intermediate_size = need(a + "feed_forward_length");
  c.num_heads = need(a + "attention.head_count");
  c.num_kv_heads = f.find(a + "attention.head_count_kv") ? need(a + "attention.head_count_kv") : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0)
    fail("{}: {} attention heads are not a multiple of {} KV heads", f.path(), c.num_heads, c.num_kv_heads);
  c.head_dim = f.find(a + "attention.key_length") ? need(a + "attention.key_length")
                                                  : c.hidden_size / c.num_heads;
  c.value_head_dim = f.find(a + "attention.value_length") ? need(a + "attention.value_length") : c.head_dim;
  c.context_length = f.find(a + "context_length") ? need(a + "context_length") : 2048;
  c.rms_norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5));

  if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens")) c.vocab_size = static_cast<std::int64_t>(tokens->size());
  c.vocab_size = f.get_int(a + "vocab_size", c.vocab_size);

  c.rope.base = static_cast<float>(f.get_float(a + "rope.freq_base", 10000.0));
  c.rope.dim = static_cast<int>(f.get_int(a + "rope.dimension_count", c.head_dim));
  if (c.rope.dim <= 0 || c.rope.dim > c.head_dim || c.rope.dim % 2 != 0)
    fail("{}: rope.dimension_count {} must be even and at most the head size {}", f.path(), c.rope.dim, c.head_dim);
  c.rope_scaling_from_gguf(f);
  c.sliding_window.assign(static_cast<std::size_t>(c.num_layers), 0);

  // Experts: a Mixtral file is a "llama" one with expert_count.
  if (f.find(a + "expert_count") != nullptr) {
    c.num_experts = need(a + "expert_count");
    c.num_experts_used = need(a + "expert_used_count");
    c.expert_intermediate_size =
        f.find(a + "expert_feed_forward_length") ? need(a + "expert_feed_forward_length") : c.intermediate_size;
    if (f.find(a + "expert_shared_feed_forward_length"))
      c.shared_expert_intermediate_size = need(a + "expert_shared_feed_forward_length");
    c.expert_weights_norm = f.get_bool(a + "expert_weights_norm", true);
    c.check_experts(f.path());
  }
  return c;
}

// llama.cpp's keys (its converter writes them from config.json's rope
// parameters): rope.scaling.type, factor, original_context_length,
// yarn_beta_fast / yarn_beta_slow / yarn_ext_factor, yarn_attn_factor (HF's
// attention_factor), yarn_log_multiplier (mscale_all_dim, as llama.cpp reads
// it: with mscale 1, except DeepSeek-V2's, whose file holds 0.1 x
// mscale_all_dim for both), and rope.scaling.attn_factor (LongRoPE's
// attention factor; a further factor on any other scaling's). LongRoPE's
// factors come later, from the rope_factors_short/long tensors.
void ModelConfig::rope_scaling_from_gguf(const GgufFile& f) {
  const std::string a = architecture + ".";
  const std::string type = f.get_string(a + "rope.scaling.type", "none");
  if (type == "linear") {
    rope.scaling = RopeScaling::kLinear;
  } else if (type == "yarn") {
    rope.scaling = RopeScaling::kYarn;
  } else if (type == "longrope") {
    rope.scaling = RopeScaling::kLongRope;
  } else if (type != "none") {
    fail("{}: rope scaling \"{}\" is not supported (none, linear, yarn, longrope are)", f.path(), type);
  }
  rope.factor = static_cast<float>(f.get_float(a + "rope.scaling.factor", 1.0));
  if (rope.scaling == RopeScaling::kNone && f.find(a + "rope.scale_linear")) {
    rope.scaling = RopeScaling::kLinear;
    rope.factor = static_cast<float>(f.get_float(a + "rope.scale_linear", 1.0));
  }
  rope.original_context = f.get_int(a + "rope.scaling.original_context_length", context_length);
  if (rope.original_context <= 0 || rope.original_context > (std::int64_t{1} << 32))
    fail("{}: rope.scaling.original_context_length {} is out of range", f.path(), rope.original_context);
  if (!(rope.factor > 0)) fail("{}: rope scaling factor {} must be positive", f.path(), rope.factor);
  const double extra_factor = f.get_float(a + "rope.scaling.attn_factor", 1.0);
  if (rope.scaling == RopeScaling::kYarn) {
    rope.beta_fast = static_cast<float>(f.get_float(a + "rope.scaling.yarn_beta_fast", 32.0));
    rope.beta_slow = static_cast<float>(f.get_float(a + "rope.scaling.yarn_beta_slow", 1.0));
    rope.ext_factor = static_cast<float>(f.get_float(a + "rope.scaling.yarn_ext_factor", 1.0));
    if (const double log_mul = f.get_float(a + "rope.scaling.yarn_log_multiplier", 0.0); log_mul != 0.0) {
      rope.mscale = architecture == "deepseek2" ? static_cast<float>(log_mul) : 1.0f;
      rope.mscale_all_dim = static_cast<float>(log_mul);
    }
    rope.attention_factor = static_cast<float>(f.get_float(a + "rope.scaling.yarn_attn_factor", 0.0));
    if (rope.attention_factor == 0.0f && extra_factor != 1.0)
      rope.attention_factor = static_cast<float>(rope_attention_factor(rope) * extra_factor);
  } else if (rope.scaling == RopeScaling::kLongRope) {
    rope.factor = static_cast<float>(static_cast<double>(context_length) / static_cast<double>(rope.original_context));
    if (f.find(a + "rope.scaling.attn_factor") != nullptr) rope.attention_factor = static_cast<float>(extra_factor);
  } else if (extra_factor != 1.0) {
    rope.attention_factor = static_cast<float>(extra_factor);
  }
  finish_rope(f.path());
}

void ModelConfig::experts_from_hf(const HfConfig& hf, bool norm_default) {
  const char* count_key = hf.has("num_experts") ? "num_experts" : "num_local_experts";
  num_experts = hf.need_count(count_key);
  num_experts_used = hf.need_count("num_experts_per_tok");
  expert_intermediate_size =
      hf.has("moe_intermediate_size") ? hf.need_count("moe_intermediate_size") : intermediate_size;
  shared_expert_intermediate_size = hf.get_int("shared_expert_intermediate_size", 0);
  expert_weights_norm = hf.get_bool("norm_topk_prob", norm_default);
  if (hf.get_int("decoder_sparse_step", 1) != 1)
    fail("{}: decoder_sparse_step {} mixes dense and expert layers, which folio does not run yet", hf.source(),
         hf.get_int("decoder_sparse_step", 1));
  if (const nlohmann::json* dense = hf.find("mlp_only_layers"); dense != nullptr && !dense->empty())
    fail("{}: mlp_only_layers makes some layers dense, which folio does not run yet in a mixture of experts",
         hf.source());
  check_experts(hf.source());
}

void ModelConfig::check_experts(const std::string& source) const {
  constexpr std::int64_t kMaxExperts = 1 << 16;
  if (num_experts <= 0 || num_experts > kMaxExperts)
    fail("{}: {} experts is out of range (1 to {})", source, num_experts, kMaxExperts);
  if (num_experts_used < 1 || num_experts_used > num_experts)
    fail("{}: {} experts used per token, but the model has {}; it must be between 1 and {}", source, num_experts_used,
         num_experts, num_experts);
  if (expert_intermediate_size <= 0)
    fail("{}: the experts' FFN size {} must be positive", source, expert_intermediate_size);
  if (shared_expert_intermediate_size < 0)
    fail("{}: the shared expert's FFN size {} is negative", source, shared_expert_intermediate_size);
}

ModelConfig ModelConfig::from_hf(const HfConfig& hf) {
  ModelConfig c;
  c.num_layers = hf.need_count("num_hidden_layers");
  c.hidden_size = hf.need_count("hidden_size");
  c.intermediate_size = hf.need_count("intermediate_size");
  c.num_heads = hf.need_count("num_attention_heads");
  c.num_kv_heads = hf.has("num_key_value_heads") ? hf.need_count("num_key_value_heads") : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0)
    fail("{}: {} attention heads are not a multiple of {} KV heads", hf.source(), c.num_heads, c.num_kv_heads);
  c.head_dim = hf.has("head_dim") ? hf.need_count("head_dim") : c.hidden_size / c.num_heads;
  c.value_head_dim = c.head_dim;
  c.context_length = hf.has("max_position_embeddings") ? hf.need_count("max_position_embeddings") : 2048;
  c.vocab_size = hf.need_count("vocab_size");
  c.rms_norm_eps = static_cast<float>(hf.get_float("rms_norm_eps", 1e-6));

  const std::string act = hf.get_string("hidden_act", hf.get_string("hidden_activation", "silu"));
  if (act == "silu" || act == "swish") {
    c.activation = Activation::kSilu;
  } else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh") {
    c.activation = Activation::kGeluTanh;
  } else {
    fail("{}: activation \"{}\" is not supported (silu and gelu_pytorch_tanh are)", hf.source(), act);
  }
  if (hf.get_bool("mlp_bias", false)) fail("{}: FFN biases (mlp_bias) are not supported", hf.source());
  c.attention_bias = hf.get_bool("attention_bias", false);
  c.tied_embeddings = hf.get_bool("tie_word_embeddings", false);

  // RoPE: transformers 5 writes rope_parameters, earlier ones rope_theta and rope_scaling.
  c.rope.style = RopeStyle::kNeox;
  c.rope.base = static_cast<float>(hf.get_float("rope_parameters.rope_theta", hf.get_float("rope_theta", 10000.0)));
  // transformers 5 keeps partial_rotary_factor among the rope parameters.
  const double rotary_share =
      hf.get_float("rope_parameters.partial_rotary_factor", hf.get_float("partial_rotary_factor", 1.0));
  c.rope.dim = static_cast<int>(static_cast<double>(c.head_dim) * rotary_share);
  if (c.rope.dim <= 0 || c.rope.dim > c.head_dim || c.rope.dim % 2 != 0)
    fail("{}: {} rotated dimensions must be even and at most the head size {}", hf.source(), c.rope.dim, c.head_dim);
  c.sliding_window.assign(static_cast<std::size_t>(c.num_layers), 0);
  c.rope_scaling_from_hf(hf, hf.has("rope_parameters") ? "rope_parameters" : "rope_scaling");
  return c;
}

void ModelConfig::rope_scaling_from_hf(const HfConfig& hf, const std::string& prefix) {
  const std::string p = prefix + ".";
  std::string type = hf.get_string(p + "rope_type", hf.get_string(p + "type", "default"));
  if (type == "su") type = "longrope";  // Phi-3's first name for it
  rope.scaling = RopeScaling::kNone;
  rope.factor = static_cast<float>(hf.get_float(p + "factor", 1.0));
  // Phi-3 keeps the trained context at the top level, and transformers
  // prefers it there to the one among the rope parameters.
  const bool nested = prefix.find('.') != std::string::npos;
  rope.original_context = !nested && hf.has("original_max_position_embeddings")
                              ? hf.need_count("original_max_position_embeddings")
                              : hf.get_int(p + "original_max_position_embeddings", context_length);
  if (rope.original_context <= 0 || rope.original_context > (std::int64_t{1} << 32))
    fail("{}: original_max_position_embeddings {} is out of range", hf.source(), rope.original_context);
  // The context over the trained one, where a type derives its factor from it.
  const double context_ratio = static_cast<double>(context_length) / static_cast<double>(rope.original_context);
  rope.attention_factor = static_cast<float>(hf.get_float(p + "attention_factor", 0.0));
  if (rope.attention_factor < 0) fail("{}: attention_factor {} is negative", hf.source(), rope.attention_factor);
  if (type == "default") {
    rope.factor = 1.0f;
  } else if (type == "linear") {
    rope.scaling = RopeScaling::kLinear;
  } else if (type == "dynamic") {
    rope.scaling = RopeScaling::kDynamic;
  } else if (type == "llama3") {
    rope.scaling = RopeScaling::kLlama3;
    rope.low_freq_factor = static_cast<float>(hf.get_float(p + "low_freq_factor", 1.0));
    rope.high_freq_factor = static_cast<float>(hf.get_float(p + "high_freq_factor", 4.0));
    if (!(rope.high_freq_factor > rope.low_freq_factor))
      fail("{}: llama3 rope scaling needs high_freq_factor > low_freq_factor", hf.source());
  } else if (type == "yarn") {
    rope.scaling = RopeScaling::kYarn;
    if (!hf.has(p + "factor")) rope.factor = static_cast<float>(context_ratio);
    // transformers reads 0 here as "not given", as it does beta's absence.
    rope.beta_fast = static_cast<float>(hf.get_float(p + "beta_fast", 0.0));
    rope.beta_slow = static_cast<float>(hf.get_float(p + "beta_slow", 0.0));
    if (rope.beta_fast == 0.0f) rope.beta_fast = 32.0f;
    if (rope.beta_slow == 0.0f) rope.beta_slow = 1.0f;
    rope.mscale = static_cast<float>(hf.get_float(p + "mscale", 0.0));
    rope.mscale_all_dim = static_cast<float>(hf.get_float(p + "mscale_all_dim", 0.0));
    rope.truncate = hf.get_bool(p + "truncate", true);
  } else if (type == "longrope") {
    rope.scaling = RopeScaling::kLongRope;
    if (!hf.has(p + "factor")) rope.factor = static_cast<float>(context_ratio);
    auto factors = [&](const char* key) {
      const nlohmann::json* list = hf.find(p + key);
      if (list == nullptr || !list->is_array())
        fail("{}: longrope scaling needs {}{} as a list of numbers", hf.source(), p, key);
      std::vector<float> out;
      for (const nlohmann::json& v : *list) {
        if (!v.is_number()) fail("{}: {}{} holds {}; expected numbers", hf.source(), p, key, v.dump());
        out.push_back(v.get<float>());
      }
      return out;
    };
    rope.short_factors = factors("short_factor");
    rope.long_factors = factors("long_factor");
  } else {
    fail("{}: rope scaling \"{}\" is not supported (default, linear, llama3, yarn, longrope, dynamic are)",
         hf.source(), type);
  }
  // Llama 4 / Ministral 3 query temperature, with transformers' names.
  rope.temperature_beta = static_cast<float>(hf.get_float(p + "llama_4_scaling_beta", 0.0));
  if (rope.temperature_beta != 0.0f) rope.temperature_length = rope.original_context;
  finish_rope(hf.source());
}

void ModelConfig::finish_rope(const std::string& source) {
  if (!(rope.factor > 0)) fail("{}: rope scaling factor {} must be positive", source, rope.factor);
  const std::size_t pairs = static_cast<std::size_t>(rope.dim / 2);
  if (rope.scaling == RopeScaling::kLongRope && !rope.short_factors.empty() &&
      (rope.short_factors.size() != pairs || rope.long_factors.size() != pairs))
    fail("{}: longrope has {} short and {} long factors; the rotary table has {} pairs", source,
         rope.short_factors.size(), rope.long_factors.size(), pairs);
  for (const std::vector<float>* list : {&rope.short_factors, &rope.long_factors})
    for (float v : *list)
      if (!(v > 0) || !std::isfinite(v)) fail("{}: longrope factor {} must be positive", source, v);
  if (rope.scaling == RopeScaling::kYarn && !(rope.beta_fast > rope.beta_slow && rope.beta_slow > 0))
    fail("{}: yarn needs beta_fast > beta_slow > 0, has {} and {}", source, rope.beta_fast, rope.beta_slow);
  // YaRN stretches the trained context by its factor: Qwen2.5 and Qwen3 keep
  // max_position_embeddings at the trained length and name the stretch in
  // rope_scaling. (Linear scaling's configs give the stretched length as
  // max_position_embeddings already: Gemma 3, LLaMA-2-7B-32K.)
  if (rope.scaling == RopeScaling::kYarn) {
    const double stretched = static_cast<double>(rope.original_context) * static_cast<double>(rope.factor);
    if (stretched > static_cast<double>(std::int64_t{1} << 32))
      fail("{}: a context of {} x {} is out of range", source, rope.original_context, rope.factor);
    context_length = std::max(context_length, static_cast<std::int64_t>(std::llround(stretched)));
  }
  if (rope.temperature_beta != 0.0f && rope.temperature_length <= 0)
    fail("{}: query temperature scaling needs the original context length", source);
}

const char* rope_scaling_name(RopeScaling scaling) {
  switch (scaling) {
    case RopeScaling::kNone: return "none";
    case RopeScaling::kLinear: return "linear";
    case RopeScaling::kYarn: return "yarn";
    case RopeScaling::kLlama3: return "llama3";
    case RopeScaling::kLongRope: return "longrope";
    case RopeScaling::kDynamic: return "dynamic";
  }
  return "?";
}

}  // namespace folio
