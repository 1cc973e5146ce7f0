// Qwen3.5 (dense; Qwen3_5ForCausalLM, llama.cpp's `qwen35`): a hybrid of
// linear attention and gated full attention. Most layers are gated DeltaNet
// (a causal depthwise convolution with SiLU over [q | k | v], then the gated
// delta rule over a per-sequence matrix state, a norm gated by SiLU(z), the
// output projection); every few a full-attention layer whose query
// projection also yields an output gate (per head: [query | gate]), with
// QK-norm per head, partial NeoX RoPE, and attention * sigmoid(gate). Norms
// are zero-centred in the checkpoint (the factor is 1 + w; GGUF stores 1 + w)
// except the DeltaNet's gated one. The linear layers keep no K/V: their state
// lives in ForwardBatch::recurrent_state, one slot per running sequence.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

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

void check_linear(const ModelConfig& c, const std::string& source) {
  const LinearAttentionConfig& a = c.linear;
  if (static_cast<std::int64_t>(c.recurrent_layers.size()) != c.num_layers)
    fail("{}: {} layers but {} entries saying which are linear attention", source, c.num_layers,
         c.recurrent_layers.size());
  if (a.conv_kernel < 1 || a.num_key_heads < 1 || a.num_value_heads < 1 || a.key_dim < 1 || a.value_dim < 1 ||
      a.num_value_heads % a.num_key_heads != 0)
    fail("{}: linear attention of kernel {}, {} key heads of {} and {} value heads of {} is not a valid shape "
         "(value heads must be a multiple of key heads)",
         source, a.conv_kernel, a.num_key_heads, a.key_dim, a.num_value_heads, a.value_dim);
}

void configure_gguf(ModelConfig& c, const GgufFile& f) {
  c.rope.style = RopeStyle::kNeox;  // interleaved MRoPE, with text's equal positions: NeoX over rope.dim
  const std::string a = "qwen35.";
  auto need = [&](const std::string& key) {
    const std::int64_t v = f.get_int(a + key, -1);
    if (v <= 0) fail("{}: {}{} is missing or not positive", f.path(), a, key);
    return v;
  };
  c.linear.conv_kernel = need("ssm.conv_kernel");
  c.linear.key_dim = need("ssm.state_size");
  c.linear.num_key_heads = need("ssm.group_count");
  c.linear.num_value_heads = need("ssm.time_step_rank");
  const std::int64_t inner = need("ssm.inner_size");
  if (inner % c.linear.num_value_heads != 0)
    fail("{}: ssm.inner_size {} is not a multiple of the {} value heads", f.path(), inner, c.linear.num_value_heads);
  c.linear.value_dim = inner / c.linear.num_value_heads;
  c.linear.tiled_heads = true;  // llama.cpp's converter reorders value heads so
  const GgufValue* layers = f.find(a + "attention.recurrent_layers");
  if (layers == nullptr || layers->type() != GgufType::kArray)
    fail("{}: {}attention.recurrent_layers (which layers are linear attention) is missing", f.path(), a);
  for (std::int64_t flag : layers->ints(a + "attention.recurrent_layers")) c.recurrent_layers.push_back(flag != 0);
  check_linear(c, f.path());
}

void configure_hf(ModelConfig& c, const HfConfig& hf) {
  require_hf_silu(c, hf, "Qwen3.5");
  c.rope.style = RopeStyle::kNeox;
  c.linear.conv_kernel = hf.get_int("linear_conv_kernel_dim", 4);
  c.linear.key_dim = hf.get_int("linear_key_head_dim", 128);
  c.linear.value_dim = hf.get_int("linear_value_head_dim", 128);
  c.linear.num_key_heads = hf.get_int("linear_num_key_heads", 16);
  c.linear.num_value_heads = hf.get_int("linear_num_value_heads", 32);
  const nlohmann::json* types = hf.find("layer_types");
  if (types == nullptr || !types->is_array() || static_cast<std::int64_t>(types->size()) != c.num_layers)
    fail("{}: layer_types must list one type for each of the {} layers", hf.source(), c.num_layers);
  for (const nlohmann::json& t : *types) {
    const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
    if (type != "linear_attention" && type != "full_attention")
      fail("{}: layer type {} is not supported (linear_attention, full_attention are)", hf.source(), type);
    c.recurrent_layers.push_back(type == "linear_attention");
  }
  check_linear(c, hf.source());
}

// An f32 host copy of a checkpoint tensor's numbers, f(x) applied to each.
template <typename F>
void add_f32(Weights& w, const std::string& name, const SafetensorsTensor& t, std::initializer_list<std::int64_t> shape,
             F f) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  if (n != t.num_elements)
    fail("tensor {} has {} numbers where {} were expected", t.name, t.num_elements, n);
  Buffer storage = host_buffer(static_cast<std::size_t>(n) * sizeof(float));
  auto* values = static_cast<float*>(storage.data());
  dequantize_row(t.dtype, t.data, values, n);
  for (std::int64_t i = 0; i < n; ++i) values[i] = f(values[i]);
  Tensor view = storage.view(DType::F32, {n});
  view.ndim = static_cast<int>(shape.size());
  int d = 0;
  for (std::int64_t s : shape) view.shape[d++] = s;
  w.add_owned(name, view, std::move(storage));
}

// The DeltaNet's tensors of a Hugging Face checkpoint, under llama.cpp's
// names: the projections as they are; the convolution ([channels, 1,
// kernel]) as f32 [channels, kernel]; A_log as the decay -exp(A_log) (what
// GGUF stores); dt_bias and the gated norm as f32. The multi-token-prediction
// layers (mtp.*) are left out, as transformers' Qwen3_5ForCausalLM does.
bool add_linear_attention_tensor(Weights& w, const HfCheckpoint& c, const SafetensorsTensor& t) {
  const std::string_view name = t.name;
  if (name.starts_with("mtp.")) return true;
  constexpr std::string_view kPrefix = "model.layers.";
  const std::size_t mark = name.find(".linear_attn.");
  if (!name.starts_with(kPrefix) || mark == std::string_view::npos) return false;
  const std::string layer(name.substr(kPrefix.size(), mark - kPrefix.size()));
  const std::string_view part = name.substr(mark + std::string_view(".linear_attn.").size());
  auto blk = [&](const char* suffix) { return fmt::format("blk.{}.{}", layer, suffix); };
  if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
    fail("{}: tensor {} has dtype {}; folio reads the linear attention's tensors in f32, f16 or bf16", c.dir(),
         t.name, folio::name(t.stored));
  const char* matrix = part == "in_proj_qkv.weight" ? "attn_qkv.weight"
                       : part == "in_proj_z.weight" ? "attn_gate.weight"
                       : part == "in_proj_a.weight" ? "ssm_alpha.weight"
                       : part == "in_proj_b.weight" ? "ssm_beta.weight"
                       : part == "out_proj.weight"  ? "ssm_out.weight"
                                                    : nullptr;
  if (matrix != nullptr) {
    if (t.num_dims != 2) fail("{}: tensor {} must be a matrix", c.dir(), t.name);
    Tensor view;
    view.data = const_cast<std::uint8_t*>(t.data);  // read-only mapping: ops never write weights
    view.dtype = t.dtype;
    view.ndim = 2;
    view.shape[0] = t.shape[0];
    view.shape[1] = t.shape[1];
    w.add(blk(matrix), view);
    return true;
  }
  if (part == "conv1d.weight") {
    if (t.num_dims != 3 || t.shape[1] != 1)
      fail("{}: tensor {} must be [channels, 1, kernel]", c.dir(), t.name);
    add_f32(w, blk("ssm_conv1d.weight"), t, {t.shape[0], t.shape[2]}, [](float x) { return x; });
    return true;
  }
  if (t.num_dims != 1) return false;
  if (part == "A_log") add_f32(w, blk("ssm_a"), t, {t.shape[0]}, [](float x) { return -std::exp(x); });
  else if (part == "dt_bias") add_f32(w, blk("ssm_dt.bias"), t, {t.shape[0]}, [](float x) { return x; });
  else if (part == "norm.weight") add_f32(w, blk("ssm_norm.weight"), t, {t.shape[0]}, [](float x) { return x; });
  else return false;
  return true;
}

// Both formats: the query projection's rows per head are [query | gate];
// they become attn_q and attn_q_gate (host copies, rows moved), so that one
// matmul yields each. post_attention_norm is the norm before the FFN.
void split_weights(Weights& w, const ModelConfig& c) {
  const std::int64_t heads = c.num_heads, hd = c.head_dim;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::string post = fmt::format("blk.{}.post_attention_norm.weight", l);
    if (w.find(post) != nullptr) {
      const Weights::RowPart part[] = {{fmt::format("blk.{}.ffn_norm.weight", l), c.hidden_size}};
      w.split_rows(post, part);
    }
    if (c.recurrent_layers[static_cast<std::size_t>(l)]) continue;
    const std::string name = fmt::format("blk.{}.attn_q.weight", l);
    const Tensor* fused = w.find(name);
    if (fused == nullptr) continue;  // Weights::get names it when the model asks
    if (fused->ndim != 2 || fused->rows() != 2 * heads * hd || fused->cols() != c.hidden_size)
      fail("{}: tensor {} has shape {}; Qwen3.5's gated query projection needs [{}, {}] ([query | gate] per head)",
           w.source(), name, fused->shape_string(), 2 * heads * hd, c.hidden_size);
    const std::size_t row_bytes = fused->row_bytes();
    for (int gate = 0; gate < 2; ++gate) {
      Buffer storage = host_buffer(static_cast<std::size_t>(heads * hd) * row_bytes);
      auto* dst = static_cast<std::uint8_t*>(storage.data());
      for (std::int64_t h = 0; h < heads; ++h)
        std::memcpy(dst + static_cast<std::size_t>(h * hd) * row_bytes, fused->row((2 * h + gate) * hd),
                    static_cast<std::size_t>(hd) * row_bytes);
      Tensor part = *fused;
      part.data = storage.data();
      part.shape[0] = heads * hd;
      w.add_owned(gate ? fmt::format("blk.{}.attn_q_gate.weight", l) : fmt::format("blk.{}.attn_q_tmp.weight", l),
                  part, std::move(storage));
    }
    w.erase(name);
    const Weights::RowPart q[] = {{name, heads * hd}};
    w.split_rows(fmt::format("blk.{}.attn_q_tmp.weight", l), q);
  }
}

class Qwen35Model final : public Model {
 public:
  Qwen35Model(const ModelConfig& config, const Weights& w, Backend& backend);
  void forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws, Tensor& logits) override;

 private:
  struct Layer {
    bool recurrent = false;
    const Tensor* attn_norm = nullptr;  // [hidden]
    const Tensor* ffn_norm = nullptr;   // [hidden]
    const Tensor* w_gate = nullptr;     // [ffn, hidden]
    const Tensor* w_up = nullptr;       // [ffn, hidden]
    const Tensor* w_down = nullptr;     // [hidden, ffn]
    // Full attention.
    const Tensor* wq = nullptr;       // [heads * head_dim, hidden]
    const Tensor* wq_gate = nullptr;  // [heads * head_dim, hidden]
    const Tensor* wk = nullptr;       // [kv_heads * head_dim, hidden]
    const Tensor* wv = nullptr;       // [kv_heads * head_dim, hidden]
    const Tensor* wo = nullptr;       // [hidden, heads * head_dim]
    const Tensor* q_norm = nullptr;   // [head_dim]
    const Tensor* k_norm = nullptr;   // [head_dim]
    // Linear attention.
    const Tensor* w_qkv = nullptr;    // [conv_channels, hidden]
    const Tensor* w_z = nullptr;      // [value_heads * value_dim, hidden]
    const Tensor* w_a = nullptr;      // [value_heads, hidden]
    const Tensor* w_b = nullptr;      // [value_heads, hidden]
    const Tensor* conv = nullptr;     // [conv_channels, kernel] f32
    const Tensor* ssm_norm = nullptr; // [value_dim] f32
    const Tensor* w_out = nullptr;    // [hidden, value_heads * value_dim]
    DeltaRuleParams delta;
    std::int64_t state_index = -1;    // its entry of ForwardBatch::recurrent_state
  };

  Backend& backend_;
  std::vector<Layer> layers_;
  const Tensor* token_embd_ = nullptr;
  const Tensor* output_norm_ = nullptr;
  const Tensor* output_ = nullptr;
  Buffer rope_storage_;
  RopeTable rope_;
  AttentionParams attention_;
};

Qwen35Model::Qwen35Model(const ModelConfig& config, const Weights& w, Backend& backend)
    : Model(config), backend_(backend) {
  const ModelConfig& c = config_;
  if (!backend.has_linear_attention())
    fail("model {}: the {} backend has no linear-attention (gated DeltaNet) kernels yet; run this hybrid model with "
         "--backend cpu",
         c.name, backend.name());
  const LinearAttentionConfig& lin = c.linear;
  const std::int64_t H = c.hidden_size, V = c.vocab_size, F = c.intermediate_size, hd = c.head_dim;
  const std::int64_t C = lin.conv_channels(), nv = lin.num_value_heads, dv = lin.value_dim;
  token_embd_ = &w.get("token_embd.weight", {V, H});
  output_norm_ = &w.get("output_norm.weight", {H});
  output_ = w.get_optional("output.weight", {V, H});
  config_.tied_embeddings = output_ == nullptr;
  if (output_ == nullptr) output_ = token_embd_;
  std::int64_t num_recurrent = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    Layer layer;
    layer.recurrent = c.recurrent_layers[static_cast<std::size_t>(l)];
    layer.attn_norm = &w.get(n("attn_norm.weight"), {H});
    layer.ffn_norm = &w.get(n("ffn_norm.weight"), {H});
    layer.w_gate = &w.get(n("ffn_gate.weight"), {F, H});
    layer.w_up = &w.get(n("ffn_up.weight"), {F, H});
    layer.w_down = &w.get(n("ffn_down.weight"), {H, F});
    if (layer.recurrent) {
      layer.w_qkv = &w.get(n("attn_qkv.weight"), {C, H});
      layer.w_z = &w.get(n("attn_gate.weight"), {nv * dv, H});
      layer.w_a = &w.get(n("ssm_alpha.weight"), {nv, H});
      layer.w_b = &w.get(n("ssm_beta.weight"), {nv, H});
      layer.conv = &w.get(n("ssm_conv1d.weight"), {C, lin.conv_kernel});
      layer.ssm_norm = &w.get(n("ssm_norm.weight"), {dv});
      layer.w_out = &w.get(n("ssm_out.weight"), {H, nv * dv});
      layer.delta.num_key_heads = lin.num_key_heads;
      layer.delta.tiled_heads = lin.tiled_heads;
      layer.delta.decay = w.get("blk." + std::to_string(l) + ".ssm_a", {nv});
      layer.delta.dt_bias = w.get(n("ssm_dt.bias"), {nv});
      const Tensor* constants[] = {layer.conv, layer.ssm_norm, &layer.delta.decay, &layer.delta.dt_bias};
      for (const Tensor* t : constants)
        if (t->dtype != DType::F32)
          fail("model {}: layer {}'s linear-attention constants must be f32, not {}", c.name, l, name(t->dtype));
      layer.state_index = num_recurrent++;
    } else {
      layer.wq = &w.get(n("attn_q.weight"), {c.q_dim(), H});
      layer.wq_gate = &w.get(n("attn_q_gate.weight"), {c.q_dim(), H});
      layer.wk = &w.get(n("attn_k.weight"), {c.kv_dim(), H});
      layer.wv = &w.get(n("attn_v.weight"), {c.kv_dim(), H});
      layer.wo = &w.get(n("attn_output.weight"), {H, c.q_dim()});
      layer.q_norm = &w.get(n("attn_q_norm.weight"), {hd});
      layer.k_norm = &w.get(n("attn_k_norm.weight"), {hd});
    }
    layers_.push_back(layer);
  }
  attention_.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const std::vector<float> table = rope_inv_freq(config_);
  const std::size_t table_bytes = table.size() * sizeof(float);
  rope_storage_ = backend.allocate(table_bytes);
  rope_.neox = true;
  rope_.dim = c.rope.dim;
  rope_.attention_factor = static_cast<float>(rope_attention_factor(c.rope));
  rope_.inv_freq = rope_storage_.view(DType::F32, {static_cast<std::int64_t>(table.size())}, 0);
  backend.copy_to_device(rope_.inv_freq, table.data(), table_bytes);
}

void Qwen35Model::forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws, Tensor& logits) {
  const ModelConfig& c = config_;
  const LinearAttentionConfig& lin = c.linear;
  Backend& be = backend_;
  const std::int64_t T = batch.token_ids.numel(), L = batch.logits_rows.numel();
  const std::int64_t H = c.hidden_size, F = c.intermediate_size, hd = c.head_dim;
  const std::int64_t heads = c.num_heads, kv_heads = c.num_kv_heads;
  const std::int64_t C = lin.conv_channels(), nv = lin.num_value_heads, dv = lin.value_dim;
  FOLIO_CHECK(T <= ws.max_tokens() && L <= ws.max_logits());
  FOLIO_CHECK(static_cast<std::int64_t>(kv.size()) == c.num_layers);
  if (batch.recurrent_state == nullptr ||
      static_cast<std::int64_t>(batch.recurrent_state->size()) != c.num_recurrent_layers())
    fail("model {}: a hybrid model's step needs the recurrent state of its {} linear-attention layers", c.name,
         c.num_recurrent_layers());

  Tensor x = ws.act(0, T, H);    // [T, hidden] the residual stream
  Tensor h = ws.act(1, T, H);    // [T, hidden] normed input of a sublayer
  Tensor out = ws.act(7, T, H);  // [T, hidden] sublayer output

  be.embedding(*token_embd_, batch.token_ids, x);
  for (const Layer& layer : layers_) {
    be.rms_norm(x, *layer.attn_norm, c.rms_norm_eps, h);
    if (layer.recurrent) {
      Tensor mixed = ws.act(2, T, C);      // [T, conv_channels] q | k | v before the convolution
      Tensor z = ws.act(3, T, nv * dv);    // [T, value_heads * value_dim] the norm's gate
      Tensor a = ws.act(4, T, nv);         // [T, value_heads]
      Tensor b = ws.act(5, T, nv);         // [T, value_heads]
      Tensor conv = ws.act(6, T, C);       // [T, conv_channels]
      Tensor core = ws.act(2, T, nv * dv); // [T, value_heads * value_dim] (mixed's slot, read by then)
      const MatmulTarget in[] = {{layer.w_qkv, &mixed}, {layer.w_z, &z}, {layer.w_a, &a}, {layer.w_b, &b}};
      be.matmuls(h, in);
      RecurrentState& state = (*batch.recurrent_state)[static_cast<std::size_t>(layer.state_index)];
      be.causal_conv1d(mixed, *layer.conv, batch.meta, batch.state_slots, state, conv);
      be.gated_delta_rule(conv, a, b, layer.delta, batch.meta, batch.state_slots, state, core);
      Tensor core_rows = core.reshaped({T * nv, dv});  // [T * value_heads, value_dim]
      be.rms_norm(core_rows, *layer.ssm_norm, c.rms_norm_eps, core_rows);
      be.glu(z, core, GluActivation::kSilu, core);
      be.matmul(*layer.w_out, core, out, nullptr);
    } else {
      Tensor q = ws.act(2, T, heads * hd);     // [T, heads * head_dim]
      Tensor gate = ws.act(3, T, heads * hd);  // [T, heads * head_dim] the output gate
      Tensor k = ws.act(4, T, kv_heads * hd);  // [T, kv_heads * head_dim]
      Tensor v = ws.act(5, T, kv_heads * hd);  // [T, kv_heads * head_dim]
      Tensor attn = ws.act(6, T, heads * hd);  // [T, heads * head_dim]
      const MatmulTarget in[] = {{layer.wq, &q}, {layer.wq_gate, &gate}, {layer.wk, &k}, {layer.wv, &v}};
      be.matmuls(h, in);
      Tensor q_rows = q.reshaped({T * heads, hd});     // [T * heads, head_dim]
      Tensor k_rows = k.reshaped({T * kv_heads, hd});  // [T * kv_heads, head_dim]
      be.rms_norm(q_rows, *layer.q_norm, c.rms_norm_eps, q_rows);
      be.rms_norm(k_rows, *layer.k_norm, c.rms_norm_eps, k_rows);
      Tensor q3 = q.reshaped({T, heads, hd});     // [T, heads, head_dim]
      Tensor k3 = k.reshaped({T, kv_heads, hd});  // [T, kv_heads, head_dim]
      be.rope(q3, batch.meta.positions, rope_);
      be.rope(k3, batch.meta.positions, rope_);
      const std::size_t l = static_cast<std::size_t>(&layer - layers_.data());
      be.write_kv(k3, v.reshaped({T, kv_heads, hd}), batch.meta.slot_mapping, kv[l]);
      Tensor attn3 = attn.reshaped({T, heads, hd});
      be.attention(q3, kv[l], batch.meta, attention_, attn3);
      be.glu(gate, attn, GluActivation::kSigmoid, attn);
      be.matmul(*layer.wo, attn, out, nullptr);
    }
    be.add(x, out);

    be.rms_norm(x, *layer.ffn_norm, c.rms_norm_eps, h);
    Tensor ffn_gate = ws.act(2, T, F);  // [T, ffn]
    Tensor ffn_up = ws.act(3, T, F);    // [T, ffn]
    const MatmulTarget gate_up[] = {{layer.w_gate, &ffn_gate}, {layer.w_up, &ffn_up}};
    be.matmuls(h, gate_up);
    be.glu_matmul(*layer.w_down, ffn_gate, ffn_up, GluActivation::kSilu, out);
    be.add(x, out);
  }

  if (L == 0) return;  // a prefill chunk that does not reach its prompt's end
  Tensor selected = ws.act(1, L, H);  // [L, hidden] rows that need logits
  be.gather_rows(x, batch.logits_rows, selected);
  be.rms_norm(selected, *output_norm_, c.rms_norm_eps, selected);
  be.matmul(*output_, selected, logits, nullptr);
}

}  // namespace

const ArchEntry kQwen35Arch{
    .name = "qwen35",
    .configure = configure_gguf,
    .create = [](const ModelConfig& c, const Weights& w, Backend& be) -> std::unique_ptr<Model> {
      return std::make_unique<Qwen35Model>(c, w, be);
    },
    .hf_class = "Qwen3_5ForCausalLM",
    .configure_hf = configure_hf,
    // Zero-centred norms: 1 + w, as GGUF stores them (post_attention_layernorm
    // keeps its GGUF name; split_weights makes it the FFN's norm).
    .hf_gemma_norms = true,
    .split_weights = split_weights,
    .family = "Qwen3.5 (hybrid: gated DeltaNet + gated attention)",
    .hf_tensor = add_linear_attention_tensor,
};

}  // namespace folio
