#include "model/arch/decoder.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "model/rotary.h"

namespace folio {

DecoderModel::DecoderModel(ModelConfig config, DecoderFeatures features, const Weights& w, Backend& backend)
    : Model(std::move(config)), features_(features), backend_(backend) {
  const ModelConfig& c = config_;
  const std::int64_t H = c.hidden_size, V = c.vocab_size, F = c.intermediate_size;
  const std::int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), v_dim = c.num_kv_heads * c.value_head_dim;
  const std::int64_t o_in = c.num_heads * c.value_head_dim;
  // Layers of different shapes or a shared KV cache (Gemma 4's) are not
  // this model's: a file that says so for another architecture is refused.
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    if (c.head_dim_of(l) != c.head_dim || c.num_kv_heads_of(l) != c.num_kv_heads ||
        c.intermediate_size_of(l) != F || !c.writes_kv(l))
      fail("model {}: layer {} differs in shape from the others or shares another's KV cache, which architecture {} "
           "does not run",
           c.name, l, c.architecture);
  token_embd_ = &w.get("token_embd.weight", {V, H});
  output_norm_ = &w.get("output_norm.weight", {H});
  output_ = w.get_optional("output.weight", {V, H});
  config_.tied_embeddings = output_ == nullptr;
  if (output_ == nullptr) output_ = token_embd_;

  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    Layer layer{};
    if (features_.pre_norms) layer.attn_norm = &w.get(n("attn_norm.weight"), {H});
    layer.wq = &w.get(n("attn_q.weight"), {q_dim, H});
    layer.wk = &w.get(n("attn_k.weight"), {kv_dim, H});
    layer.wv = &w.get(n("attn_v.weight"), {v_dim, H});
    layer.wo = &w.get(n("attn_output.weight"), {H, o_in});
    layer.bq = w.get_optional(n("attn_q.bias"), {q_dim});
    layer.bk = w.get_optional(n("attn_k.bias"), {kv_dim});
    layer.bv = w.get_optional(n("attn_v.bias"), {v_dim});
    layer.bo = w.get_optional(n("attn_output.bias"), {H});
    if (features_.qk_norm) {
      layer.q_norm = &w.get(n("attn_q_norm.weight"), {features_.qk_norm_whole ? q_dim : c.head_dim});
      layer.k_norm = &w.get(n("attn_k_norm.weight"), {features_.qk_norm_whole ? kv_dim : c.head_dim});
    }
    if (features_.sandwich_norms) {
      layer.post_attn_norm = &w.get(n("post_attention_norm.weight"), {H});
      layer.post_ffn_norm = &w.get(n("post_ffw_norm.weight"), {H});
    }
    if (features_.pre_norms) layer.ffn_norm = &w.get(n("ffn_norm.weight"), {H});
    if (c.is_moe()) {
      const std::int64_t E = c.num_experts, Fe = c.expert_intermediate_size, Fs = c.shared_expert_intermediate_size;
      layer.router = &w.get(n("ffn_gate_inp.weight"), {E, H});
      layer.gate_exps = &w.get(n("ffn_gate_exps.weight"), {E, Fe, H});
      layer.up_exps = &w.get(n("ffn_up_exps.weight"), {E, Fe, H});
      layer.down_exps = &w.get(n("ffn_down_exps.weight"), {E, H, Fe});
      layer.router_bias = w.get_optional(n("ffn_gate_inp.bias"), {E});
      layer.gate_exps_bias = w.get_optional(n("ffn_gate_exps.bias"), {E, Fe});
      layer.up_exps_bias = w.get_optional(n("ffn_up_exps.bias"), {E, Fe});
      layer.down_exps_bias = w.get_optional(n("ffn_down_exps.bias"), {E, H});
      if (Fs > 0) {
        layer.w_gate = &w.get(n("ffn_gate_shexp.weight"), {Fs, H});
        layer.w_up = &w.get(n("ffn_up_shexp.weight"), {Fs, H});
        layer.w_down = &w.get(n("ffn_down_shexp.weight"), {H, Fs});
        const Tensor* gate = w.find(n("ffn_gate_inp_shexp.weight"));
        layer.shared_gate = gate != nullptr && gate->ndim == 1 ? &w.get(n("ffn_gate_inp_shexp.weight"), {H})
                                                               : &w.get(n("ffn_gate_inp_shexp.weight"), {1, H});
      }
    } else {
      layer.w_gate = &w.get(n("ffn_gate.weight"), {F, H});
      layer.w_up = &w.get(n("ffn_up.weight"), {F, H});
      layer.w_down = &w.get(n("ffn_down.weight"), {H, F});
    }
    layer.attention.scale = features_.attention_scale > 0 ? features_.attention_scale
                            : c.attention_scale > 0   ? c.attention_scale
                                                      : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    layer.attention.softcap = c.attention_softcap;
    layer.attention.sliding_window = c.sliding_window.empty() ? 0 : c.sliding_window[l];
    if (features_.attention_sinks) layer.attention.sinks = w.get(n("attn_sinks.weight"), {c.num_heads});
    layers_.push_back(layer);
  }
  // The rotary tables on the device: the config's; LongRoPE's long-context
  // set; the sliding-window layers' own (unscaled, at their own base) where
  // they have one. Q's copy of each carries the query temperature.
  std::vector<std::vector<float>> tables = {rope_inv_freq(config_)};
  const bool longrope = c.rope.scaling == RopeScaling::kLongRope;
  if (longrope) tables.push_back(rope_inv_freq(config_, /*long_factors=*/true));
  if (features_.sliding_window_rope_base > 0) {
    ModelConfig local = config_;
    local.rope.base = features_.sliding_window_rope_base;
    local.rope.scaling = RopeScaling::kNone;
    local.rope.freq_factors.clear();
    tables.push_back(rope_inv_freq(local));
  }
  const auto half = static_cast<std::int64_t>(tables[0].size());
  const std::size_t table_bytes = static_cast<std::size_t>(half) * sizeof(float);
  rope_storage_ = backend.allocate(tables.size() * table_bytes);
  const float attention_factor = static_cast<float>(rope_attention_factor(c.rope));
  for (std::size_t i = 0; i < tables.size(); ++i) {
    RopeTable& t = rope_k_[i];
    t.neox = c.rope.style == RopeStyle::kNeox;
    t.dim = c.rope.dim;
    t.attention_factor = i + 1 == tables.size() && features_.sliding_window_rope_base > 0 ? 1.0f : attention_factor;
    t.inv_freq = rope_storage_.view(DType::F32, {half}, i * table_bytes);
    backend.copy_to_device(t.inv_freq, tables[i].data(), table_bytes);
    rope_q_[i] = t;
    rope_q_[i].temperature_beta = c.rope.temperature_beta;
    rope_q_[i].temperature_offset = c.rope.temperature_offset;
    rope_q_[i].temperature_length = static_cast<float>(std::max<std::int64_t>(1, c.rope.temperature_length));
  }
  if (!c.rope_skipped.empty() && static_cast<std::int64_t>(c.rope_skipped.size()) != c.num_layers)
    fail("model {}: {} layers but {} entries saying which rotate", c.name, c.num_layers, c.rope_skipped.size());
  const std::size_t sliding_table = tables.size() - 1;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    Layer& layer = layers_[l];
    if (!c.rope_skipped.empty() && c.rope_skipped[l]) continue;
    const bool local = layer.attention.sliding_window > 0 && features_.sliding_window_rope_base > 0;
    for (std::size_t context = 0; context < 2; ++context) {
      const std::size_t table = local ? sliding_table : longrope ? context : 0;
      layer.rope[context] = {&rope_k_[table], &rope_q_[table]};
    }
  }
}

void DecoderModel::forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws,
                           Tensor& logits) {
  const ModelConfig& c = config_;
  Backend& be = backend_;
  const std::int64_t T = batch.token_ids.numel();
  const std::int64_t L = batch.logits_rows.numel();
  const std::int64_t H = c.hidden_size, F = c.intermediate_size;
  const std::int64_t heads = c.num_heads, kv_heads = c.num_kv_heads, hd = c.head_dim, vd = c.value_head_dim;
  FOLIO_CHECK(T <= ws.max_tokens() && L <= ws.max_logits());
  FOLIO_CHECK(static_cast<std::int64_t>(kv.size()) == c.num_layers);

  Tensor x = ws.act(0, T, H);               // [T, hidden] the residual stream
  Tensor h = ws.act(1, T, H);               // [T, hidden] normed input of a sublayer
  Tensor q = ws.act(2, T, heads * hd);      // [T, heads * head_dim]
  Tensor k = ws.act(3, T, kv_heads * hd);   // [T, kv_heads * head_dim]
  Tensor v = ws.act(4, T, kv_heads * vd);   // [T, kv_heads * value_head_dim]
  Tensor attn = ws.act(5, T, heads * vd);   // [T, heads * value_head_dim]
  Tensor gate = ws.act(6, T, F);            // [T, ffn]
  Tensor up = ws.act(7, T, F);              // [T, ffn]
  Tensor out = ws.act(2, T, H);             // [T, hidden] sublayer output (reuses q's slot)

  be.embedding(*token_embd_, batch.token_ids, x);
  if (features_.scale_embeddings) be.scale(x, std::sqrt(static_cast<float>(H)));
  if (c.embedding_scale != 1.0f) be.scale(x, c.embedding_scale);
  const std::int64_t max_model_len = batch.max_model_len > 0 ? batch.max_model_len : c.context_length;
  const int context = rope_long_factors(c.rope, max_model_len) ? 1 : 0;

  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const Layer& layer = layers_[l];
    // Without pre-norms (OLMo 2) a sublayer reads the residual stream itself.
    if (features_.pre_norms) be.rms_norm(x, *layer.attn_norm, c.rms_norm_eps, h);
    const MatmulTarget qkv[] = {{layer.wq, &q, layer.bq}, {layer.wk, &k, layer.bk}, {layer.wv, &v, layer.bv}};
    be.matmuls(features_.pre_norms ? h : x, qkv);
    Tensor q3 = q.reshaped({T, heads, hd});   // [T, heads, head_dim]
    Tensor k3 = k.reshaped({T, kv_heads, hd});  // [T, kv_heads, head_dim]
    if (features_.qk_norm) {
      // Each row normed: [T, heads * head_dim] as a whole, or [T * heads, head_dim] per head.
      Tensor qr = features_.qk_norm_whole ? q : q.reshaped({T * heads, hd});
      Tensor kr = features_.qk_norm_whole ? k : k.reshaped({T * kv_heads, hd});
      be.rms_norm(qr, *layer.q_norm, c.rms_norm_eps, qr);
      be.rms_norm(kr, *layer.k_norm, c.rms_norm_eps, kr);
    }
    if (const LayerRope& rope = layer.rope[context]; rope.k != nullptr) {
      be.rope(q3, batch.meta.positions, *rope.q);
      be.rope(k3, batch.meta.positions, *rope.k);
    }
    be.write_kv(k3, v.reshaped({T, kv_heads, vd}), batch.meta.slot_mapping, kv[l]);
    Tensor attn3 = attn.reshaped({T, heads, vd});
    be.attention(q3, kv[l], batch.meta, layer.attention, attn3);
    be.matmul(*layer.wo, attn, out, layer.bo);
    if (features_.sandwich_norms) be.rms_norm(out, *layer.post_attn_norm, c.rms_norm_eps, out);
    if (c.residual_scale != 1.0f) be.scale(out, c.residual_scale);
    be.add(x, out);

    if (features_.pre_norms) be.rms_norm(x, *layer.ffn_norm, c.rms_norm_eps, h);
    const Tensor& ffn_in = features_.pre_norms ? h : x;  // [T, hidden]
    if (layer.router != nullptr) {
      moe_ffn(layer, ffn_in, ws, out);
    } else {
      const MatmulTarget gate_up[] = {{layer.w_gate, &gate}, {layer.w_up, &up}};
      be.matmuls(ffn_in, gate_up);
      be.glu_matmul(*layer.w_down, gate, up, features_.activation, out);
    }
    if (features_.sandwich_norms) be.rms_norm(out, *layer.post_ffn_norm, c.rms_norm_eps, out);
    if (c.residual_scale != 1.0f) be.scale(out, c.residual_scale);
    be.add(x, out);
  }

  if (L == 0) return;  // a prefill chunk that does not reach its prompt's end
  Tensor selected = ws.act(1, L, H);  // [L, hidden] rows that need logits
  be.gather_rows(x, batch.logits_rows, selected);
  be.rms_norm(selected, *output_norm_, c.rms_norm_eps, selected);
  be.matmul(*output_, selected, logits, nullptr);
  if (c.logit_scale != 1.0f || c.final_logit_softcap > 0.0f)
    be.scale_logits(logits, c.logit_scale, c.final_logit_softcap);
}

// Slots 0-2 hold the residual stream, h and out; the experts use the rest.
// Each (token, rank) assignment is one row of the grouped activations, so a
// token's k results are computed from its own row only and summed in rank
// order: its output never depends on the other tokens of the step.
void DecoderModel::moe_ffn(const Layer& layer, const Tensor& h, const Workspace& ws, Tensor& out) {
  const ModelConfig& c = config_;
  Backend& be = backend_;
  const std::int64_t T = h.rows(), H = c.hidden_size, E = c.num_experts, k = c.num_experts_used;
  const std::int64_t N = T * k, Fe = c.expert_intermediate_size;

  Tensor router_logits = ws.act(3, T, E);                  // [T, experts]
  Tensor ids = ws.i32(4, T, k);                            // [T, k] expert of each assignment, best first
  Tensor weights = ws.f32(5, T, k);                        // [T, k] its routing weight
  Tensor offsets = ws.i32(6, 1, E + 1).reshaped({E + 1});  // [experts + 1] grouped rows of each expert
  Tensor row_tokens = ws.i32(7, N, 1).reshaped({N});       // [T * k] token of each grouped row
  Tensor assignment_rows = ws.i32(8, T, k);                // [T, k] grouped row of each assignment
  Tensor xs = ws.act(9, N, H);                             // [T * k, hidden] inputs, grouped by expert
  Tensor gs = ws.act(10, N, Fe);                           // [T * k, expert_ffn]
  Tensor us = ws.act(11, N, Fe);                           // [T * k, expert_ffn]
  Tensor ys = ws.act(9, N, H);                             // [T * k, hidden] outputs (xs's slot, read by then)

  be.matmul(*layer.router, h, router_logits, layer.router_bias);
  be.moe_route(router_logits, c.expert_weights_norm, ids, weights);
  be.moe_group(ids, offsets, row_tokens, assignment_rows);
  be.gather_rows(h, row_tokens, xs);
  be.expert_matmul(*layer.gate_exps, xs, offsets, gs, layer.gate_exps_bias);
  be.expert_matmul(*layer.up_exps, xs, offsets, us, layer.up_exps_bias);
  be.glu(gs, us, features_.activation, gs);
  be.expert_matmul(*layer.down_exps, gs, offsets, ys, layer.down_exps_bias);
  be.moe_combine(ys, assignment_rows, weights, out);

  if (layer.shared_gate == nullptr) return;
  const std::int64_t Fs = c.shared_expert_intermediate_size;
  Tensor gate = ws.act(10, T, Fs);      // [T, shared_ffn]
  Tensor up = ws.act(11, T, Fs);        // [T, shared_ffn]
  Tensor shared = ws.act(9, T, H);      // [T, hidden]
  Tensor gate_logit = ws.act(3, T, 1);  // [T, 1]
  const MatmulTarget shared_in[] = {{layer.w_gate, &gate}, {layer.w_up, &up}, {layer.shared_gate, &gate_logit}};
  be.matmuls(h, shared_in);
  be.glu_matmul(*layer.w_down, gate, up, features_.activation, shared);
  be.add_sigmoid_gated(out, shared, gate_logit);
}

}  // namespace folio
