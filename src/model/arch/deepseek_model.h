// DeepseekModel: DeepSeek-V2/V3's decoder - multi-head latent attention
// (MLA) and DeepSeek's mixture of experts - written once against Backend ops.
//
// The cache holds per token and layer one row [k_pe | c]: the roped rotary
// key (R = qk_rope_head_dim) and the normed latent c (K = kv_lora_rank),
// with c again as the value row; the engine sees one K/V head of R + K with
// values of K (ModelConfig::is_mla), paged, prefix-cached and copied like
// any other cache. Attention is always the absorbed form, on the existing
// attention op: head i's score q_i . k_i = q_pe_i . k_pe + q_nope_i .
// (W_UK_i c) = [q_pe_i | W_UK_i^T q_nope_i] . [k_pe | c], and its output
// o_i = W_UV_i (sum_j p_j c_j), so W_UK_i^T is folded into Q's weight and
// W_UV_i into the output projection's at load (the DeepSeek-V2 paper's
// absorption; deepseek2.cc). One form for every step shape keeps the CPU's
// results independent of how a batch is made up (batch invariance), and the
// decode step reads only R + K numbers per cached token.
#pragma once

#include <vector>

#include "model/model.h"
#include "model/weights.h"

namespace folio {

class DeepseekModel : public Model {
 public:
  DeepseekModel(ModelConfig config, const Weights& weights, Backend& backend);
  void forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws, Tensor& logits) override;

 private:
  struct Layer {
    const Tensor* attn_norm;
    const Tensor* wq_a;         // [q_lora, hidden], or null without q_lora
    const Tensor* q_a_norm;     // [q_lora]
    const Tensor* wq;           // [heads * (R + K), q_lora or hidden]: per head [rope | W_UK^T nope]
    const Tensor* w_latent;     // [K, hidden] the compressed KV's latent rows
    const Tensor* w_k_rope;     // [R, hidden] its rotary key rows
    const Tensor* kv_a_norm;    // [K]
    const Tensor* wo;           // [hidden, heads * K]: W_O with each head's W_UV folded in
    const Tensor* ffn_norm;
    const Tensor* w_gate;       // dense FFN, or the shared experts of a MoE layer
    const Tensor* w_up;
    const Tensor* w_down;
    const Tensor* router;       // MoE: [experts, hidden]
    const Tensor* router_bias;  // [experts] V3's selection-only correction bias, or null
    const Tensor* gate_exps;    // [experts, expert_ffn, hidden]
    const Tensor* up_exps;      // [experts, expert_ffn, hidden]
    const Tensor* down_exps;    // [experts, hidden, expert_ffn]
    AttentionParams attention;
  };

  // The mixture of experts of `layer` on h: [T, hidden] -> out: [T, hidden].
  void moe_ffn(const Layer& layer, const Tensor& h, const Workspace& ws, Tensor& out);

  Backend& backend_;
  const Tensor* token_embd_;
  const Tensor* output_norm_;
  const Tensor* output_;
  std::vector<Layer> layers_;
  Buffer rope_storage_;
  RopeTable rope_;
};

}  // namespace folio
