// Gemma 4 (text): Gemma 3's sandwich-normed decoder with layers of two kinds
// and three additions. Sliding-window layers have small heads rotated whole;
// global layers larger heads, fewer KV heads, keys that are their values where
// the checkpoint says so, and "proportional" RoPE (a quarter of the pairs
// rotate, the rest by nothing). Q, K and V are RMS-normed per head (V without
// a weight) and the attention scale is 1. Per-layer embeddings: a second
// table gives each token a row per layer, mixed with a projection of the
// embedding and fed into each layer through a gated projection after its FFN.
// The last num_kv_shared_layers layers attend over the cache of the last
// earlier layer of their kind and write none. Each layer ends by scaling the
// residual stream by its scalar; the logits are soft-capped. Norm weights are
// multiplied as they are in both formats.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/buffer.h"
#include "core/error.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"
#include "model/rotary.h"
#include "model/safetensors_file.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

// GGUF marks the pairs that proportional RoPE leaves alone by a frequency
// factor of 1e30 (llama.cpp's converter); folio gives them frequency zero,
// the exact identity, as transformers does.
constexpr float kUnrotatedFactor = 1e29f;

// Layer l's KV source where the last num_shared layers reuse the cache of the
// last earlier layer of the same kind (sliding or global); throws when a
// kind has no such layer.
std::vector<std::int64_t> kv_sources(const ModelConfig& c, std::int64_t num_shared, const std::string& source) {
  if (num_shared < 0 || num_shared >= c.num_layers)
    fail("{}: {} KV-shared layers of {} leave no layer to write the cache", source, num_shared, c.num_layers);
  std::vector<std::int64_t> sources(static_cast<std::size_t>(c.num_layers));
  const std::int64_t first_shared = c.num_layers - num_shared;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    sources[static_cast<std::size_t>(l)] = l;
    if (l < first_shared) continue;
    const bool sliding = c.sliding_window[static_cast<std::size_t>(l)] > 0;
    std::int64_t s = first_shared - 1;
    while (s >= 0 && (c.sliding_window[static_cast<std::size_t>(s)] > 0) != sliding) --s;
    if (s < 0)
      fail("{}: KV-shared layer {} ({}) has no earlier layer of its kind to read the cache of", source, l,
           sliding ? "sliding-window" : "global");
    sources[static_cast<std::size_t>(l)] = s;
  }
  return sources;
}

// Sets the per-layer head sizes and KV heads from the two kinds' values; the
// uniform ones become the largest.
void set_layer_shapes(ModelConfig& c, std::int64_t local_head_dim, std::int64_t global_head_dim,
                      std::int64_t local_kv_heads, std::int64_t global_kv_heads) {
  c.layer_head_dim.clear();
  c.layer_num_kv_heads.clear();
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const bool sliding = c.sliding_window[static_cast<std::size_t>(l)] > 0;
    c.layer_head_dim.push_back(sliding ? local_head_dim : global_head_dim);
    c.layer_num_kv_heads.push_back(sliding ? local_kv_heads : global_kv_heads);
  }
  c.head_dim = c.value_head_dim = std::max(local_head_dim, global_head_dim);
  c.num_kv_heads = std::max(local_kv_heads, global_kv_heads);
}

void check_shapes(const ModelConfig& c, const std::string& source) {
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    if (c.num_kv_heads_of(l) <= 0 || c.num_heads % c.num_kv_heads_of(l) != 0 || c.head_dim_of(l) <= 0 ||
        c.head_dim_of(l) % 2 != 0)
      fail("{}: layer {} has {} KV heads of {} numbers for {} query heads; folio needs a divisor and an even size",
           source, l, c.num_kv_heads_of(l), c.head_dim_of(l), c.num_heads);
  if (c.per_layer_input_size < 0) fail("{}: the per-layer input size {} is negative", source, c.per_layer_input_size);
}

void configure_gguf(ModelConfig& c, const GgufFile& f) {
  const std::string a = "gemma4.";
  c.rope.style = RopeStyle::kNeox;
  c.activation = Activation::kGeluTanh;
  const std::int64_t window = f.get_int(a + "attention.sliding_window", 0);
  const GgufValue* pattern = f.find(a + "attention.sliding_window_pattern");
  if (pattern == nullptr || !pattern->is_array())
    fail("{}: gemma4 needs {}attention.sliding_window_pattern, one entry per layer", f.path(), a);
  const std::vector<std::int64_t> sliding = pattern->ints(a + "attention.sliding_window_pattern");
  if (static_cast<std::int64_t>(sliding.size()) != c.num_layers)
    fail("{}: the sliding-window pattern has {} entries for {} layers", f.path(), sliding.size(), c.num_layers);
  if (window <= 0) fail("{}: gemma4 needs a positive {}attention.sliding_window", f.path(), a);
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    c.sliding_window[static_cast<std::size_t>(l)] = sliding[static_cast<std::size_t>(l)] != 0 ? window : 0;
  // key_length is the global layers' head size, key_length_swa the others'.
  const std::int64_t global_head_dim = c.head_dim;
  const std::int64_t local_head_dim = f.get_int(a + "attention.key_length_swa", global_head_dim);
  if (f.get_int(a + "attention.value_length_swa", local_head_dim) != local_head_dim ||
      c.value_head_dim != global_head_dim)
    fail("{}: gemma4's value heads must be the size of its key heads", f.path());
  // head_count_kv: one number, or one per layer, the same within a kind.
  std::int64_t local_kv = 0, global_kv = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    std::int64_t& kind = c.sliding_window[static_cast<std::size_t>(l)] > 0 ? local_kv : global_kv;
    if (kind == 0) kind = c.num_kv_heads_of(l);
    if (c.num_kv_heads_of(l) != kind) fail("{}: gemma4's KV heads differ within a kind of layer", f.path());
  }
  if (local_kv == 0) local_kv = global_kv;
  if (global_kv == 0) global_kv = local_kv;
  set_layer_shapes(c, local_head_dim, global_head_dim, local_kv, global_kv);
  if (c.rope.dim != global_head_dim)
    fail("{}: rope.dimension_count {} must be the global head size {} (proportional RoPE spans the head)", f.path(),
         c.rope.dim, global_head_dim);
  if (f.get_int(a + "rope.dimension_count_swa", local_head_dim) != local_head_dim)
    fail("{}: the sliding-window layers must rotate their whole heads of {}", f.path(), local_head_dim);
  c.sliding_rope_base = static_cast<float>(f.get_float(a + "rope.freq_base_swa", 10000.0));
  c.kv_source_layer = kv_sources(c, f.get_int(a + "attention.shared_kv_layers", 0), f.path());
  c.per_layer_input_size = f.get_int(a + "embedding_length_per_layer_input", 0);
  c.final_logit_softcap = static_cast<float>(f.get_float(a + "final_logit_softcapping", 0.0));
  c.attention_scale = 1.0f;
  check_shapes(c, f.path());
}

void configure_hf(ModelConfig& c, const HfConfig& hf) {
  if (c.activation != Activation::kGeluTanh)
    fail("{}: a gemma4 model needs hidden_activation gelu_pytorch_tanh", hf.source());
  if (hf.get_bool("enable_moe_block", false))
    fail("{}: Gemma 4's mixture-of-experts block (26B-A4B) is not supported yet", hf.source());
  if (hf.get_bool("attention_bias", false)) fail("{}: attention biases are not supported for gemma4", hf.source());
  if (const nlohmann::json* bidi = hf.find("use_bidirectional_attention"); bidi != nullptr && !bidi->is_null())
    fail("{}: bidirectional attention is not supported for gemma4 text models", hf.source());
  c.rope.style = RopeStyle::kNeox;
  const std::int64_t window = hf.get_int("sliding_window", 512);
  if (window <= 0) fail("{}: sliding_window {} must be positive", hf.source(), window);
  const nlohmann::json* types = hf.find("layer_types");
  if (types != nullptr && (!types->is_array() || static_cast<std::int64_t>(types->size()) != c.num_layers))
    fail("{}: layer_types must list one type for each of the {} layers", hf.source(), c.num_layers);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    // transformers' default: five sliding layers to one global, the last global.
    std::string type = (l + 1) % 6 != 0 && l + 1 != c.num_layers ? "sliding_attention" : "full_attention";
    if (types != nullptr) {
      const nlohmann::json& t = (*types)[static_cast<std::size_t>(l)];
      type = t.is_string() ? t.get<std::string>() : t.dump();
    }
    if (type == "sliding_attention")
      c.sliding_window[static_cast<std::size_t>(l)] = window;
    else if (type != "full_attention")
      fail("{}: layer type {} is not supported (sliding_attention, full_attention are)", hf.source(), type);
  }
  // The global layers' head size and KV heads: per_layer_config (what
  // transformers writes; a layer it leaves out keeps the base values), else
  // global_head_dim (512 by default) and num_global_key_value_heads, the
  // latter only with attention_k_eq_v, as transformers reads them.
  std::int64_t global_head_dim = hf.get_int("global_head_dim", 512);
  std::int64_t global_kv =
      hf.get_bool("attention_k_eq_v", false) ? hf.get_int("num_global_key_value_heads", c.num_kv_heads) : c.num_kv_heads;
  if (const nlohmann::json* per_layer = hf.find("per_layer_config"); per_layer != nullptr && per_layer->is_object()) {
    bool found = false;
    for (std::int64_t l = 0; l < c.num_layers; ++l) {
      const std::string prefix = fmt::format("per_layer_config.{}.", l);
      const std::int64_t hd = hf.get_int(prefix + "head_dim", c.head_dim);
      const std::int64_t kv = hf.get_int(prefix + "num_key_value_heads", c.num_kv_heads);
      if (c.sliding_window[static_cast<std::size_t>(l)] > 0) {
        if (hd != c.head_dim || kv != c.num_kv_heads)
          fail("{}: per_layer_config changes sliding-window layer {}, which folio does not run", hf.source(), l);
        continue;
      }
      if (found && (hd != global_head_dim || kv != global_kv))
        fail("{}: gemma4's global layers differ in head size or KV heads", hf.source());
      global_head_dim = hd;
      global_kv = kv;
      found = true;
    }
  }
  set_layer_shapes(c, c.head_dim, global_head_dim, c.num_kv_heads, global_kv);

  const std::string local = "rope_parameters.sliding_attention.", global = "rope_parameters.full_attention.";
  if (hf.get_string(local + "rope_type", "default") != "default")
    fail("{}: RoPE scaling on the sliding-window layers is not supported", hf.source());
  c.sliding_rope_base = static_cast<float>(hf.get_float(local + "rope_theta", 10000.0));
  c.rope.base = static_cast<float>(hf.get_float(global + "rope_theta", 1000000.0));
  c.rope.scaling = RopeScaling::kNone;
  c.rope.dim = static_cast<int>(global_head_dim);
  const std::string global_type = hf.get_string(global + "rope_type", "proportional");
  if (global_type == "proportional") {
    const double share = hf.get_float(global + "partial_rotary_factor", 1.0);
    if (!(share > 0 && share <= 1)) fail("{}: partial_rotary_factor {} must lie in (0, 1]", hf.source(), share);
    if (hf.get_float(global + "factor", 1.0) != 1.0)
      fail("{}: a proportional RoPE factor other than 1 is not supported", hf.source());
    c.rope_rotated_pairs = static_cast<std::int64_t>(share * static_cast<double>(global_head_dim) / 2);
  } else if (global_type != "default") {
    fail("{}: RoPE type {} on the global layers is not supported (proportional, default are)", hf.source(),
         global_type);
  }
  c.kv_source_layer = kv_sources(c, hf.get_int("num_kv_shared_layers", 0), hf.source());
  // The shared layers' FFN is twice as wide with use_double_wide_mlp.
  if (hf.get_bool("use_double_wide_mlp", false)) {
    c.layer_intermediate_size.clear();
    for (std::int64_t l = 0; l < c.num_layers; ++l)
      c.layer_intermediate_size.push_back(c.intermediate_size * (c.writes_kv(l) ? 1 : 2));
    c.intermediate_size = *std::max_element(c.layer_intermediate_size.begin(), c.layer_intermediate_size.end());
  }
  c.per_layer_input_size = hf.get_int("hidden_size_per_layer_input", 0);
  if (c.per_layer_input_size > 0 && hf.get_int("vocab_size_per_layer_input", c.vocab_size) != c.vocab_size)
    fail("{}: per-layer embeddings over {} tokens of a {}-token vocabulary are not supported", hf.source(),
         hf.get_int("vocab_size_per_layer_input", c.vocab_size), c.vocab_size);
  c.final_logit_softcap = static_cast<float>(hf.get_float("final_logit_softcapping", 0.0));
  if (hf.has("attn_logit_softcapping") && !hf.find("attn_logit_softcapping")->is_null())
    fail("{}: attention soft-capping is not supported for gemma4", hf.source());
  c.attention_scale = 1.0f;
  check_shapes(c, hf.source());
}

// The checkpoint tensors no generic name covers: the per-layer embeddings'
// table, projection and norm, each layer's gate, projection and norm of its
// per-layer input, and its scalar (under model.language_model. too, in
// Gemma4ForConditionalGeneration). Vectors become f32 host copies, as the
// generic loader makes of norms.
bool add_hf_tensor(Weights& w, const HfCheckpoint& checkpoint, const SafetensorsTensor& t) {
  std::string_view name = t.name;
  // Gemma4ForConditionalGeneration: the audio tower and the vision and audio
  // embedders are left out, as the vision tower is (folio runs the text).
  for (std::string_view tower : {"model.audio_tower.", "model.embed_audio.", "model.embed_vision."})
    if (name.starts_with(tower)) return true;
  std::string text;
  if (name.starts_with("model.language_model.")) {
    text = "model." + std::string(name.substr(std::string_view("model.language_model.").size()));
    name = text;
  }
  std::string gguf;
  if (name == "model.embed_tokens_per_layer.weight") gguf = "per_layer_token_embd.weight";
  if (name == "model.per_layer_model_projection.weight") gguf = "per_layer_model_proj.weight";
  if (name == "model.per_layer_projection_norm.weight") gguf = "per_layer_proj_norm.weight";
  unsigned layer = 0;
  std::string_view rest;
  if (gguf.empty() && split_hf_layer_name(name, layer, rest)) {
    if (rest == "per_layer_input_gate.weight") gguf = fmt::format("blk.{}.inp_gate.weight", layer);
    if (rest == "per_layer_projection.weight") gguf = fmt::format("blk.{}.proj.weight", layer);
    if (rest == "post_per_layer_input_norm.weight") gguf = fmt::format("blk.{}.post_norm.weight", layer);
    if (rest == "layer_scalar") gguf = fmt::format("blk.{}.layer_output_scale.weight", layer);
  }
  if (gguf.empty()) return false;
  if (t.stored != SafetensorsDtype::F32 && t.stored != SafetensorsDtype::F16 && t.stored != SafetensorsDtype::BF16)
    fail("{}: tensor {} has dtype {}; gemma4 reads f32, f16 or bf16", checkpoint.dir(), t.name, folio::name(t.stored));
  Tensor view;
  view.data = const_cast<std::uint8_t*>(t.data);  // read-only mapping: ops never write weights
  view.dtype = t.dtype;
  view.ndim = t.num_dims;
  for (int d = 0; d < t.num_dims; ++d) view.shape[d] = t.shape[d];
  if (view.ndim != 1 || view.dtype == DType::F32) {
    w.add(gguf, view);
    return true;
  }
  const std::int64_t n = view.shape[0];
  Buffer storage = host_buffer(static_cast<std::size_t>(n) * sizeof(float));
  dequantize_row(t.dtype, t.data, static_cast<float*>(storage.data()), n);
  const Tensor copy = storage.view(DType::F32, {n});
  w.add_owned(gguf, copy, std::move(storage));
  return true;
}

class Gemma4Model : public Model {
 public:
  Gemma4Model(ModelConfig config, const Weights& w, Backend& backend);
  void forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws, Tensor& logits) override;

 private:
  struct Layer {
    std::int64_t head_dim = 0;
    std::int64_t num_kv_heads = 0;
    std::int64_t ffn = 0;
    bool writes_kv = true;
    const Tensor* attn_norm;
    const Tensor* wq;
    const Tensor* wk;  // null where the layer reads an earlier layer's cache
    const Tensor* wv;  // null there too, and where the keys are the values
    const Tensor* wo;
    const Tensor* q_norm;
    const Tensor* k_norm;
    const Tensor* post_attn_norm;
    const Tensor* ffn_norm;
    const Tensor* w_gate;
    const Tensor* w_up;
    const Tensor* w_down;
    const Tensor* post_ffn_norm;
    const Tensor* inp_gate;   // [per_layer, hidden]
    const Tensor* inp_proj;   // [hidden, per_layer]
    const Tensor* post_inp_norm;
    float scalar = 1.0f;
    const RopeTable* rope;
    AttentionParams attention;
  };

  // rows: [num_layers, capacity] i32 on the device, row l holding t *
  // num_layers + l: the rows of layer l's per-layer inputs in the [tokens *
  // layers, per_layer] view. Made for the workspace's largest step.
  void ensure_per_layer_rows(std::int64_t max_tokens);

  Backend& backend_;
  const Tensor* token_embd_;
  const Tensor* output_norm_;
  const Tensor* output_;
  const Tensor* per_layer_embd_ = nullptr;  // [vocab, layers * per_layer]
  const Tensor* per_layer_proj_ = nullptr;  // [layers * per_layer, hidden]
  const Tensor* per_layer_norm_ = nullptr;  // [per_layer]
  std::vector<Layer> layers_;
  Buffer rope_storage_;  // both kinds' inverse frequencies
  RopeTable local_rope_;
  RopeTable global_rope_;
  Buffer ones_storage_;  // [head_dim] f32 ones: V's norm has no weight
  Buffer rows_storage_;
  std::int64_t rows_capacity_ = 0;
};

Gemma4Model::Gemma4Model(ModelConfig config, const Weights& w, Backend& backend)
    : Model(std::move(config)), backend_(backend) {
  ModelConfig& c = config_;
  const std::int64_t H = c.hidden_size, V = c.vocab_size, L = c.num_layers, P = c.per_layer_input_size;
  token_embd_ = &w.get("token_embd.weight", {V, H});
  output_norm_ = &w.get("output_norm.weight", {H});
  output_ = w.get_optional("output.weight", {V, H});
  c.tied_embeddings = output_ == nullptr;
  if (output_ == nullptr) output_ = token_embd_;
  if (P > 0) {
    per_layer_embd_ = &w.get("per_layer_token_embd.weight", {V, L * P});
    per_layer_proj_ = &w.get("per_layer_model_proj.weight", {L * P, H});
    per_layer_norm_ = &w.get("per_layer_proj_norm.weight", {P});
  }
  // GGUF's proportional RoPE: the pairs with a huge frequency factor are
  // the unrotated ones, after the rotated.
  if (!c.rope.freq_factors.empty()) {
    std::int64_t rotated = 0;
    while (rotated < static_cast<std::int64_t>(c.rope.freq_factors.size()) &&
           c.rope.freq_factors[static_cast<std::size_t>(rotated)] < kUnrotatedFactor)
      ++rotated;
    for (std::size_t i = 0; i < c.rope.freq_factors.size(); ++i)
      if ((static_cast<std::int64_t>(i) < rotated && c.rope.freq_factors[i] != 1.0f) ||
          (static_cast<std::int64_t>(i) >= rotated && c.rope.freq_factors[i] < kUnrotatedFactor))
        fail("model {}: rope_freqs must be ones then unrotated pairs' 1e30 (proportional RoPE)", c.name);
    c.rope_rotated_pairs = rotated;
    c.rope.freq_factors.clear();
  }

  // The two rotary tables: the sliding layers' whole-head one and the global
  // layers' full-head one with its unrotated pairs at frequency zero.
  std::int64_t local_dim = 0;
  for (std::int64_t l = 0; l < L; ++l)
    if (c.sliding_window[static_cast<std::size_t>(l)] > 0) local_dim = c.head_dim_of(l);
  ModelConfig local = c;
  local.rope.base = c.sliding_rope_base > 0 ? c.sliding_rope_base : c.rope.base;
  local.rope.dim = static_cast<int>(local_dim > 0 ? local_dim : c.rope.dim);
  std::vector<float> local_freq = rope_inv_freq(local);
  std::vector<float> global_freq = rope_inv_freq(c);
  if (c.rope_rotated_pairs > 0)
    for (std::size_t i = static_cast<std::size_t>(c.rope_rotated_pairs); i < global_freq.size(); ++i)
      global_freq[i] = 0.0f;
  const std::size_t local_bytes = local_freq.size() * sizeof(float), global_bytes = global_freq.size() * sizeof(float);
  rope_storage_ = backend.allocate(local_bytes + global_bytes);
  local_rope_.neox = global_rope_.neox = true;
  local_rope_.dim = local.rope.dim;
  global_rope_.dim = c.rope.dim;
  local_rope_.inv_freq = rope_storage_.view(DType::F32, {static_cast<std::int64_t>(local_freq.size())});
  global_rope_.inv_freq =
      rope_storage_.view(DType::F32, {static_cast<std::int64_t>(global_freq.size())}, local_bytes);
  backend.copy_to_device(local_rope_.inv_freq, local_freq.data(), local_bytes);
  backend.copy_to_device(global_rope_.inv_freq, global_freq.data(), global_bytes);

  const std::vector<float> ones(static_cast<std::size_t>(c.head_dim), 1.0f);
  ones_storage_ = backend.allocate(ones.size() * sizeof(float));
  backend.copy_to_device(ones_storage_.view(DType::F32, {c.head_dim}), ones.data(), ones.size() * sizeof(float));

  for (std::int64_t l = 0; l < L; ++l) {
    auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    Layer layer{};
    layer.head_dim = c.head_dim_of(l);
    layer.num_kv_heads = c.num_kv_heads_of(l);
    layer.ffn = c.intermediate_size_of(l);
    layer.writes_kv = c.writes_kv(l);
    const std::int64_t hd = layer.head_dim, kv_dim = layer.num_kv_heads * hd, F = layer.ffn;
    layer.attn_norm = &w.get(n("attn_norm.weight"), {H});
    layer.wq = &w.get(n("attn_q.weight"), {c.num_heads * hd, H});
    layer.q_norm = &w.get(n("attn_q_norm.weight"), {hd});
    const bool sliding = c.sliding_window[static_cast<std::size_t>(l)] > 0;
    if (layer.writes_kv) {
      // A global layer without V's projection uses its keys as values.
      layer.wk = &w.get(n("attn_k.weight"), {kv_dim, H});
      layer.wv = sliding ? &w.get(n("attn_v.weight"), {kv_dim, H}) : w.get_optional(n("attn_v.weight"), {kv_dim, H});
      layer.k_norm = &w.get(n("attn_k_norm.weight"), {hd});
    }
    layer.wo = &w.get(n("attn_output.weight"), {H, c.num_heads * hd});
    layer.post_attn_norm = &w.get(n("post_attention_norm.weight"), {H});
    layer.ffn_norm = &w.get(n("ffn_norm.weight"), {H});
    layer.w_gate = &w.get(n("ffn_gate.weight"), {F, H});
    layer.w_up = &w.get(n("ffn_up.weight"), {F, H});
    layer.w_down = &w.get(n("ffn_down.weight"), {H, F});
    layer.post_ffn_norm = &w.get(n("post_ffw_norm.weight"), {H});
    if (P > 0) {
      layer.inp_gate = &w.get(n("inp_gate.weight"), {P, H});
      layer.inp_proj = &w.get(n("proj.weight"), {H, P});
      layer.post_inp_norm = &w.get(n("post_norm.weight"), {H});
    }
    // The scalar is read once to the host: the ops take it as a number.
    if (const Tensor* scalar = w.get_optional(n("layer_output_scale.weight"), {1})) {
      if (scalar->dtype != DType::F32) fail("model {}: {} must be f32", c.name, n("layer_output_scale.weight"));
      backend.copy_to_host(&layer.scalar, *scalar, sizeof(float));
    }
    layer.rope = sliding ? &local_rope_ : &global_rope_;
    layer.attention.scale = 1.0f;
    layer.attention.sliding_window = c.sliding_window[static_cast<std::size_t>(l)];
    layers_.push_back(layer);
  }
}

void Gemma4Model::ensure_per_layer_rows(std::int64_t max_tokens) {
  if (max_tokens <= rows_capacity_) return;
  const std::int64_t L = config_.num_layers;
  std::vector<std::int32_t> rows(static_cast<std::size_t>(L * max_tokens));
  for (std::int64_t l = 0; l < L; ++l)
    for (std::int64_t t = 0; t < max_tokens; ++t)
      rows[static_cast<std::size_t>(l * max_tokens + t)] = static_cast<std::int32_t>(t * L + l);
  rows_storage_ = backend_.allocate(rows.size() * sizeof(std::int32_t));
  backend_.copy_to_device(rows_storage_.view(DType::I32, {L * max_tokens}), rows.data(),
                          rows.size() * sizeof(std::int32_t));
  rows_capacity_ = max_tokens;
}

void Gemma4Model::forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws, Tensor& logits) {
  const ModelConfig& c = config_;
  Backend& be = backend_;
  const std::int64_t T = batch.token_ids.numel();
  const std::int64_t NL = batch.logits_rows.numel();
  const std::int64_t H = c.hidden_size, L = c.num_layers, P = c.per_layer_input_size, heads = c.num_heads;
  FOLIO_CHECK(T <= ws.max_tokens() && NL <= ws.max_logits());
  FOLIO_CHECK(static_cast<std::int64_t>(kv.size()) == L);

  Tensor x = ws.act(0, T, H);       // [T, hidden] the residual stream
  Tensor h = ws.act(1, T, H);       // [T, hidden] normed input of a sublayer
  Tensor out = ws.act(2, T, H);     // [T, hidden] sublayer output
  Tensor inputs = ws.act(8, T, L * P);  // [T, layers * per_layer] every layer's per-layer input

  be.embedding(*token_embd_, batch.token_ids, x);
  be.scale(x, std::sqrt(static_cast<float>(H)));
  if (P > 0) {
    // (norm(proj(x) / sqrt(hidden)) + table[token] * sqrt(per_layer)) / sqrt(2), per layer.
    ensure_per_layer_rows(ws.max_tokens());
    Tensor token_rows = ws.act(9, T, L * P);  // [T, layers * per_layer]
    be.embedding(*per_layer_embd_, batch.token_ids, token_rows);
    be.scale(token_rows, std::sqrt(static_cast<float>(P)));
    be.matmul(*per_layer_proj_, x, inputs, nullptr);
    be.scale(inputs, 1.0f / std::sqrt(static_cast<float>(H)));
    Tensor per_layer = inputs.reshaped({T * L, P});  // [T * layers, per_layer]
    be.rms_norm(per_layer, *per_layer_norm_, c.rms_norm_eps, per_layer);
    be.add(inputs, token_rows);
    be.scale(inputs, 1.0f / std::sqrt(2.0f));
  }

  for (std::int64_t l = 0; l < L; ++l) {
    const Layer& layer = layers_[static_cast<std::size_t>(l)];
    const std::int64_t hd = layer.head_dim, kvh = layer.num_kv_heads, F = layer.ffn;
    Tensor q = ws.act(2, T, heads * hd);   // [T, heads * head_dim]
    Tensor attn = ws.act(5, T, heads * hd);  // [T, heads * head_dim]
    Tensor q3 = q.reshaped({T, heads, hd});  // [T, heads, head_dim]
    be.rms_norm(x, *layer.attn_norm, c.rms_norm_eps, h);
    if (layer.writes_kv) {
      Tensor k = ws.act(3, T, kvh * hd);  // [T, kv_heads * head_dim]
      Tensor v = ws.act(4, T, kvh * hd);  // [T, kv_heads * head_dim]
      if (layer.wv != nullptr) {
        const MatmulTarget qkv[] = {{layer.wq, &q}, {layer.wk, &k}, {layer.wv, &v}};
        be.matmuls(h, qkv);
      } else {
        const MatmulTarget qk[] = {{layer.wq, &q}, {layer.wk, &k}};
        be.matmuls(h, qk);
      }
      // V's weightless norm, from K's projection where the keys are the values.
      Tensor v_rows = v.reshaped({T * kvh, hd});  // [T * kv_heads, head_dim]
      be.rms_norm(layer.wv != nullptr ? v_rows : k.reshaped({T * kvh, hd}), ones_storage_.view(DType::F32, {hd}),
                  c.rms_norm_eps, v_rows);
      Tensor k_rows = k.reshaped({T * kvh, hd});  // [T * kv_heads, head_dim]
      be.rms_norm(k_rows, *layer.k_norm, c.rms_norm_eps, k_rows);
      Tensor k3 = k.reshaped({T, kvh, hd});  // [T, kv_heads, head_dim]
      be.rope(k3, batch.meta.positions, *layer.rope);
      be.write_kv(k3, v.reshaped({T, kvh, hd}), batch.meta.slot_mapping, kv[static_cast<std::size_t>(l)]);
    } else {
      be.matmul(*layer.wq, h, q, nullptr);
    }
    Tensor q_rows = q.reshaped({T * heads, hd});  // [T * heads, head_dim]
    be.rms_norm(q_rows, *layer.q_norm, c.rms_norm_eps, q_rows);
    be.rope(q3, batch.meta.positions, *layer.rope);
    Tensor attn3 = attn.reshaped({T, heads, hd});  // [T, heads, head_dim]
    // A shared layer's entry is its source layer's pools, written above.
    be.attention(q3, kv[static_cast<std::size_t>(l)], batch.meta, layer.attention, attn3);
    be.matmul(*layer.wo, attn, out, nullptr);
    be.rms_norm(out, *layer.post_attn_norm, c.rms_norm_eps, out);
    be.add(x, out);

    Tensor gate = ws.act(6, T, F);  // [T, ffn]
    Tensor up = ws.act(7, T, F);    // [T, ffn]
    be.rms_norm(x, *layer.ffn_norm, c.rms_norm_eps, h);
    const MatmulTarget gate_up[] = {{layer.w_gate, &gate}, {layer.w_up, &up}};
    be.matmuls(h, gate_up);
    be.glu_matmul(*layer.w_down, gate, up, GluActivation::kGeluTanh, out);
    be.rms_norm(out, *layer.post_ffn_norm, c.rms_norm_eps, out);
    be.add(x, out);

    if (P > 0) {
      Tensor input = ws.act(9, T, P);  // [T, per_layer] this layer's per-layer input
      Tensor g = ws.act(10, T, P);     // [T, per_layer]
      // [T] i32: row t * layers + l of the [T * layers, per_layer] view.
      const Tensor rows = rows_storage_.view(DType::I32, {T}, static_cast<std::size_t>(l * rows_capacity_) * 4);
      be.gather_rows(inputs.reshaped({T * L, P}), rows, input);
      be.matmul(*layer.inp_gate, x, g, nullptr);
      be.glu(g, input, GluActivation::kGeluTanh, g);
      be.matmul(*layer.inp_proj, g, out, nullptr);
      be.rms_norm(out, *layer.post_inp_norm, c.rms_norm_eps, out);
      be.add(x, out);
    }
    if (layer.scalar != 1.0f) be.scale(x, layer.scalar);
  }

  if (NL == 0) return;  // a prefill chunk that does not reach its prompt's end
  Tensor selected = ws.act(1, NL, H);  // [NL, hidden] rows that need logits
  be.gather_rows(x, batch.logits_rows, selected);
  be.rms_norm(selected, *output_norm_, c.rms_norm_eps, selected);
  be.matmul(*output_, selected, logits, nullptr);
  if (c.final_logit_softcap > 0.0f) be.scale_logits(logits, 1.0f, c.final_logit_softcap);
}

}  // namespace

const ArchEntry kGemma4Arch{
    .name = "gemma4",
    .configure = configure_gguf,
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<Gemma4Model>(c, w, be);
    },
    .hf_class = "Gemma4ForCausalLM",
    .configure_hf = configure_hf,
    .hf_post_attention_norm = true,
    .family = "Gemma 4",
    .hf_tensor = add_hf_tensor,
    .hf_vision_class = "Gemma4ForConditionalGeneration",
};

}  // namespace folio
