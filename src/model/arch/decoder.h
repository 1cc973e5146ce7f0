// DecoderModel: the pre-norm decoder-only transformer that the llama family,
// qwen2 and their relatives share (embed, N x [norm, attention, residual,
// norm, gated FFN, residual], final norm, LM head). An architecture file
// picks its features, the config its numbers (rotary scaling and the layers
// that rotate nothing, sliding windows, soft-caps, the multipliers on the
// embeddings, block outputs and logits); the math is written here once.
// When the config has experts, each FFN is a mixture of experts (Mixtral,
// Qwen2/3-MoE, gpt-oss): a router, the top-k of num_experts gated experts per
// token, grouped by expert so that each expert's weights are read once per
// step, and an optional shared expert behind a sigmoid gate. Biases (the
// output projection's, the router's, the experts') and attention sinks are
// read where the file has them.
#pragma once

#include <vector>

#include "model/model.h"
#include "model/weights.h"

namespace folio {

struct DecoderFeatures {
  bool qk_norm = false;             // per-head RMSNorm of Q and K (qwen3, gemma3)
  bool qk_norm_whole = false;       // ... over all of Q's and K's heads at once instead (olmo2)
  bool pre_norms = true;            // norms before attention and the FFN (all but olmo2)
  bool sandwich_norms = false;      // post-attention and post-FFN norms (gemma, glm4, olmo2)
  bool scale_embeddings = false;    // multiply embeddings by sqrt(hidden) (gemma)
  GluActivation activation = GluActivation::kSilu;
  float attention_scale = 0.0f;     // 0: the config's, else 1/sqrt(head_dim)
  // RoPE base of the sliding-window layers, unscaled (gemma3: 10,000); 0: the
  // config's RoPE everywhere.
  float sliding_window_rope_base = 0.0f;
  bool attention_sinks = false;     // a learned logit per head in the softmax (gpt-oss)
};

class DecoderModel : public Model {
 public:
  DecoderModel(ModelConfig config, DecoderFeatures features, const Weights& weights, Backend& backend);
  void forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws, Tensor& logits) override;

 private:
  // A layer's rotary tables: K's, and Q's (the same but for a query
  // temperature), each null where the layer rotates nothing.
  struct LayerRope {
    const RopeTable* k = nullptr;
    const RopeTable* q = nullptr;
  };

  struct Layer {
    const Tensor* attn_norm;
    const Tensor* wq;
    const Tensor* wk;
    const Tensor* wv;
    const Tensor* wo;
    const Tensor* bq;  // optional biases
    const Tensor* bk;
    const Tensor* bv;
    const Tensor* bo;
    const Tensor* q_norm;  // optional per-head norms
    const Tensor* k_norm;
    const Tensor* post_attn_norm;
    const Tensor* ffn_norm;
    const Tensor* w_gate;  // dense FFN, or the shared expert of a MoE layer (optional there)
    const Tensor* w_up;
    const Tensor* w_down;
    const Tensor* router;       // MoE: [experts, hidden]
    const Tensor* gate_exps;    // MoE: [experts, expert_ffn, hidden]
    const Tensor* up_exps;      // MoE: [experts, expert_ffn, hidden]
    const Tensor* down_exps;    // MoE: [experts, hidden, expert_ffn]
    const Tensor* router_bias;  // optional MoE biases: [experts]
    const Tensor* gate_exps_bias;  // [experts, expert_ffn]
    const Tensor* up_exps_bias;    // [experts, expert_ffn]
    const Tensor* down_exps_bias;  // [experts, hidden]
    const Tensor* shared_gate;  // MoE with a shared expert: [1, hidden] (or [hidden])
    const Tensor* post_ffn_norm;
    // [0]: the config's tables; [1]: LongRoPE's long-context ones (the same
    // as [0] for other scalings).
    LayerRope rope[2];
    AttentionParams attention;
  };

  // The mixture-of-experts FFN of `layer` on h: [T, hidden] -> out: [T, hidden].
  void moe_ffn(const Layer& layer, const Tensor& h, const Workspace& ws, Tensor& out);

  DecoderFeatures features_;
  Backend& backend_;
  const Tensor* token_embd_;
  const Tensor* output_norm_;
  const Tensor* output_;  // token_embd_ when tied
  std::vector<Layer> layers_;
  Buffer rope_storage_;  // the rotary tables' inverse frequencies, on the device
  // K's and Q's tables: the config's, LongRoPE's long ones, and the
  // sliding-window layers' own.
  RopeTable rope_k_[3];
  RopeTable rope_q_[3];
};

}  // namespace folio
