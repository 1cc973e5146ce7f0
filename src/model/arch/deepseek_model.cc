#include "model/arch/deepseek_model.h"

#include <fmt/format.h>

#include "core/error.h"
#include "model/rotary.h"

namespace folio {

DeepseekModel::DeepseekModel(ModelConfig config, const Weights& w, Backend& backend)
    : Model(std::move(config)), backend_(backend) {
  const ModelConfig& c = config_;
  FOLIO_CHECK(c.is_mla() && c.grouped_routing);
  const std::int64_t H = c.hidden_size, V = c.vocab_size, F = c.intermediate_size, N = c.num_heads;
  const std::int64_t R = c.rope.dim, K = c.kv_lora_rank;
  token_embd_ = &w.get("token_embd.weight", {V, H});
  output_norm_ = &w.get("output_norm.weight", {H});
  output_ = w.get_optional("output.weight", {V, H});
  config_.tied_embeddings = output_ == nullptr;
  if (output_ == nullptr) output_ = token_embd_;

  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    Layer layer{};
    layer.attn_norm = &w.get(n("attn_norm.weight"), {H});
    if (c.q_lora_rank > 0) {
      layer.wq_a = &w.get(n("attn_q_a.weight"), {c.q_lora_rank, H});
      layer.q_a_norm = &w.get(n("attn_q_a_norm.weight"), {c.q_lora_rank});
    }
    layer.wq = &w.get(n("attn_q_latent.weight"), {N * (R + K), c.q_lora_rank > 0 ? c.q_lora_rank : H});
    layer.w_latent = &w.get(n("attn_kv_a_latent.weight"), {K, H});
    layer.w_k_rope = &w.get(n("attn_k_rope.weight"), {R, H});
    layer.kv_a_norm = &w.get(n("attn_kv_a_norm.weight"), {K});
    layer.wo = &w.get(n("attn_output_latent.weight"), {H, N * K});
    layer.ffn_norm = &w.get(n("ffn_norm.weight"), {H});
    if (l < c.num_dense_layers) {
      layer.w_gate = &w.get(n("ffn_gate.weight"), {F, H});
      layer.w_up = &w.get(n("ffn_up.weight"), {F, H});
      layer.w_down = &w.get(n("ffn_down.weight"), {H, F});
    } else {
      const std::int64_t E = c.num_experts, Fe = c.expert_intermediate_size, Fs = c.shared_expert_intermediate_size;
      layer.router = &w.get(n("ffn_gate_inp.weight"), {E, H});
      layer.router_bias = w.get_optional(n("exp_probs_b.bias"), {E});
      layer.gate_exps = &w.get(n("ffn_gate_exps.weight"), {E, Fe, H});
      layer.up_exps = &w.get(n("ffn_up_exps.weight"), {E, Fe, H});
      layer.down_exps = &w.get(n("ffn_down_exps.weight"), {E, H, Fe});
      if (Fs > 0) {
        layer.w_gate = &w.get(n("ffn_gate_shexp.weight"), {Fs, H});
        layer.w_up = &w.get(n("ffn_up_shexp.weight"), {Fs, H});
        layer.w_down = &w.get(n("ffn_down_shexp.weight"), {H, Fs});
      }
    }
    layer.attention.scale = c.attention_scale;
    layers_.push_back(layer);
  }
  // One rotary table: the rotary key's and Q's rope part, the first R
  // numbers of every head row.
  const std::vector<float> inv_freq = rope_inv_freq(config_);
  const std::size_t table_bytes = inv_freq.size() * sizeof(float);
  rope_storage_ = backend.allocate(table_bytes);
  rope_.neox = false;
  rope_.dim = static_cast<int>(R);
  rope_.attention_factor = static_cast<float>(rope_attention_factor(c.rope));
  rope_.inv_freq = rope_storage_.view(DType::F32, {static_cast<std::int64_t>(inv_freq.size())}, 0);
  backend.copy_to_device(rope_.inv_freq, inv_freq.data(), table_bytes);
}

void DeepseekModel::forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws,
                            Tensor& logits) {
  const ModelConfig& c = config_;
  Backend& be = backend_;
  const std::int64_t T = batch.token_ids.numel();
  const std::int64_t L = batch.logits_rows.numel();
  const std::int64_t H = c.hidden_size, F = c.intermediate_size, N = c.num_heads;
  const std::int64_t R = c.rope.dim, K = c.kv_lora_rank;
  FOLIO_CHECK(T <= ws.max_tokens() && L <= ws.max_logits());
  FOLIO_CHECK(static_cast<std::int64_t>(kv.size()) == c.num_layers);

  Tensor x = ws.act(0, T, H);              // [T, hidden] the residual stream
  Tensor h = ws.act(1, T, H);              // [T, hidden] normed input of a sublayer
  Tensor q_a = ws.act(2, T, c.q_lora_rank > 0 ? c.q_lora_rank : 1);  // [T, q_lora]
  Tensor q = ws.act(3, T, N * (R + K));    // [T, heads * (R + K)] per head [q_pe | W_UK^T q_nope]
  Tensor latent = ws.act(4, T, K);         // [T, kv_lora] the normed latent c, also the value row
  Tensor k_pe = ws.act(5, T, R);           // [T, rope] the rotary key
  Tensor k_row = ws.act(6, T, R + K);      // [T, R + K] the cached key row [k_pe | c]
  Tensor attn = ws.act(7, T, N * K);       // [T, heads * kv_lora] each head's latent output
  Tensor out = ws.act(2, T, H);            // [T, hidden] sublayer output (q_a's slot, read by then)

  be.embedding(*token_embd_, batch.token_ids, x);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const Layer& layer = layers_[l];
    be.rms_norm(x, *layer.attn_norm, c.rms_norm_eps, h);
    if (layer.wq_a != nullptr) {
      be.matmul(*layer.wq_a, h, q_a, nullptr);
      be.rms_norm(q_a, *layer.q_a_norm, c.rms_norm_eps, q_a);
      be.matmul(*layer.wq, q_a, q, nullptr);
    } else {
      be.matmul(*layer.wq, h, q, nullptr);
    }
    const MatmulTarget kv_a[] = {{layer.w_latent, &latent}, {layer.w_k_rope, &k_pe}};
    be.matmuls(h, kv_a);
    be.rms_norm(latent, *layer.kv_a_norm, c.rms_norm_eps, latent);
    be.concat_cols(k_pe, latent, k_row);
    Tensor q3 = q.reshaped({T, N, R + K});        // [T, heads, R + K]
    Tensor k3 = k_row.reshaped({T, 1, R + K});    // [T, 1, R + K]
    be.rope(q3, batch.meta.positions, rope_);
    be.rope(k3, batch.meta.positions, rope_);
    be.write_kv(k3, latent.reshaped({T, 1, K}), batch.meta.slot_mapping, kv[l]);
    Tensor attn3 = attn.reshaped({T, N, K});      // [T, heads, kv_lora]
    be.attention(q3, kv[l], batch.meta, layer.attention, attn3);
    be.matmul(*layer.wo, attn, out, nullptr);
    be.add(x, out);

    be.rms_norm(x, *layer.ffn_norm, c.rms_norm_eps, h);
    if (layer.router != nullptr) {
      moe_ffn(layer, h, ws, out);
    } else {
      Tensor gate = ws.act(3, T, F);  // [T, ffn]
      Tensor up = ws.act(4, T, F);    // [T, ffn]
      const MatmulTarget gate_up[] = {{layer.w_gate, &gate}, {layer.w_up, &up}};
      be.matmuls(h, gate_up);
      be.glu_matmul(*layer.w_down, gate, up, GluActivation::kSilu, out);
    }
    be.add(x, out);
  }

  if (L == 0) return;  // a prefill chunk that does not reach its prompt's end
  Tensor selected = ws.act(1, L, H);  // [L, hidden] rows that need logits
  be.gather_rows(x, batch.logits_rows, selected);
  be.rms_norm(selected, *output_norm_, c.rms_norm_eps, selected);
  be.matmul(*output_, selected, logits, nullptr);
}

// As DecoderModel::moe_ffn (each token's output from its own row only, its k
// results summed in rank order), with DeepSeek's router and the shared
// experts added without a gate. Slots 0-2 hold the residual stream, h and
// out.
void DeepseekModel::moe_ffn(const Layer& layer, const Tensor& h, const Workspace& ws, Tensor& out) {
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

  be.matmul(*layer.router, h, router_logits, nullptr);
  be.moe_route_grouped(router_logits, layer.router_bias, c.routing, ids, weights);
  be.moe_group(ids, offsets, row_tokens, assignment_rows);
  be.gather_rows(h, row_tokens, xs);
  be.expert_matmul(*layer.gate_exps, xs, offsets, gs, nullptr);
  be.expert_matmul(*layer.up_exps, xs, offsets, us, nullptr);
  be.glu(gs, us, GluActivation::kSilu, gs);
  be.expert_matmul(*layer.down_exps, gs, offsets, ys, nullptr);
  be.moe_combine(ys, assignment_rows, weights, out);

  if (layer.w_gate == nullptr) return;
  const std::int64_t Fs = c.shared_expert_intermediate_size;
  Tensor gate = ws.act(10, T, Fs);  // [T, shared_ffn]
  Tensor up = ws.act(11, T, Fs);    // [T, shared_ffn]
  Tensor shared = ws.act(9, T, H);  // [T, hidden]
  const MatmulTarget shared_in[] = {{layer.w_gate, &gate}, {layer.w_up, &up}};
  be.matmuls(h, shared_in);
  be.glu_matmul(*layer.w_down, gate, up, GluActivation::kSilu, shared);
  be.add(out, shared);
}

}  // namespace folio
