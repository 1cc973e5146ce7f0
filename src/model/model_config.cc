#include "model/model_config.h"

#include <cmath>

#include "core/error.h"
#include "model/gguf_file.h"

namespace folio {

std::int64_t ModelConfig::kv_bytes_per_token(double bytes_per_number) const {
  return static_cast<std::int64_t>(std::llround(
      static_cast<double>(num_layers * num_kv_heads * (head_dim + value_head_dim)) * bytes_per_number));
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
  std::string scaling = f.get_string(a + "rope.scaling.type", "none");
  if (scaling == "linear") {
    c.rope.scaling = RopeScaling::kLinear;
  } else if (scaling == "yarn") {
    c.rope.scaling = RopeScaling::kYarn;
  } else if (scaling != "none") {
    fail("{}: rope scaling \"{}\" is not supported (none, linear, yarn are)", f.path(), scaling);
  }
  c.rope.factor = static_cast<float>(f.get_float(a + "rope.scaling.factor", 1.0));
  if (c.rope.scaling == RopeScaling::kNone && f.find(a + "rope.scale_linear")) {
    c.rope.scaling = RopeScaling::kLinear;
    c.rope.factor = static_cast<float>(f.get_float(a + "rope.scale_linear", 1.0));
  }
  c.rope.original_context = f.get_int(a + "rope.scaling.original_context_length", c.context_length);
  if (!(c.rope.factor > 0)) fail("{}: rope scaling factor {} must be positive", f.path(), c.rope.factor);

  c.sliding_window.assign(static_cast<std::size_t>(c.num_layers), 0);
  return c;
}

}  // namespace folio
