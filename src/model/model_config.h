// ModelConfig: a model's hyper-parameters, normalised across file formats so
// that nothing above the loader knows where they came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/grouped_routing.h"

namespace folio {

class GgufFile;
class HfConfig;

// How RoPE pairs the dimensions of a head: kNormal rotates (2i, 2i+1) (GGUF
// llama files, whose Q/K rows the converter permuted), kNeox rotates
// (i, i + rot_dim/2) (Qwen2, Gemma, and every Hugging Face checkpoint, whose
// rotate_half works on the rows as trained).
enum class RopeStyle { kNormal, kNeox };

// How a config stretches RoPE past the trained context: kLinear divides every
// frequency; kLlama3 slows the long wavelengths; kYarn blends interpolated and
// original frequencies over a correction range and scales cos/sin; kLongRope
// divides each pair's frequency by a factor of its own (short or long set);
// kDynamic (NTK by sequence length) is the plain table within the trained
// context, which is all folio runs of it.
enum class RopeScaling { kNone, kLinear, kYarn, kLlama3, kLongRope, kDynamic };

struct RopeConfig {
  RopeStyle style = RopeStyle::kNormal;
  float base = 10000.0f;
  int dim = 0;  // dimensions rotated per head (<= head_dim)
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.0f;             // linear / yarn / llama3 / dynamic scale; longrope: context / original
  std::int64_t original_context = 0;  // the trained context the scaling starts from
  float low_freq_factor = 1.0f;    // llama3
  float high_freq_factor = 4.0f;   // llama3
  // YaRN: the correction range's rotation counts, whether its ends are
  // rounded to whole pairs (HF truncate; GGUF files always are), and GGUF's
  // extrapolation factor (the ramp's weight; HF configs have 1).
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  bool truncate = true;
  float ext_factor = 1.0f;
  // The magnitude on cos/sin: attention_factor when the config gives one
  // (> 0), else YaRN's from mscale / mscale_all_dim (DeepSeek style, both > 0)
  // or from the factor alone, LongRoPE's from the context ratio.
  float attention_factor = 0.0f;
  float mscale = 0.0f;
  float mscale_all_dim = 0.0f;
  // LongRoPE: per rotated pair, a divisor of its frequency for contexts up
  // to original_context (short) and beyond it (long).
  std::vector<float> short_factors;  // [dim / 2]
  std::vector<float> long_factors;   // [dim / 2]
  // Per rotated pair, a divisor of its frequency (GGUF's rope_freqs.weight,
  // read from the file before the weights go to the device); empty: none.
  std::vector<float> freq_factors;  // [dim / 2]
  // Query temperature (Ministral 3, Llama 4): queries are multiplied by
  // 1 + beta * ln(1 + floor((pos + offset) / length)); beta 0: none.
  float temperature_beta = 0.0f;
  float temperature_offset = 0.0f;
  std::int64_t temperature_length = 0;
};

// "none", "linear", "yarn", "llama3", "longrope", "dynamic".
const char* rope_scaling_name(RopeScaling scaling);

enum class Activation { kSilu, kGeluTanh };

// The linear-attention (gated DeltaNet) layers of a hybrid model (Qwen3-Next,
// Qwen3.5): their heads and the causal convolution's kernel. Each such layer
// keeps a fixed-size state per sequence instead of K/V per token.
struct LinearAttentionConfig {
  std::int64_t conv_kernel = 0;
  std::int64_t num_key_heads = 0;
  std::int64_t num_value_heads = 0;
  std::int64_t key_dim = 0;    // per head
  std::int64_t value_dim = 0;  // per head
  // Value heads in llama.cpp's tiled order (GGUF) instead of grouped by key
  // head (Hugging Face): DeltaRuleParams::tiled_heads.
  bool tiled_heads = false;
  // Channels of the convolution: queries, keys and values side by side.
  std::int64_t conv_channels() const { return 2 * num_key_heads * key_dim + num_value_heads * value_dim; }
  // f32 bytes one sequence's state takes in one layer: the convolution's
  // window and the delta rule's matrices.
  std::uint64_t state_bytes() const {
    return static_cast<std::uint64_t>((conv_kernel - 1) * conv_channels() + num_value_heads * key_dim * value_dim) *
           sizeof(float);
  }
};

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", ...
  std::string name;

  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;         // [hidden]
  std::int64_t intermediate_size = 0;   // FFN width
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;            // key and query head size
  std::int64_t value_head_dim = 0;      // value head size (usually == head_dim)
  // The longest context the config supports: max_position_embeddings, or
  // the trained context times a YaRN factor when that is longer.
  std::int64_t context_length = 0;
  float rms_norm_eps = 1e-5f;
  RopeConfig rope;
  Activation activation = Activation::kSilu;
  bool tied_embeddings = false;         // output projection shares token_embd
  bool attention_bias = false;          // Q/K/V carry biases (qwen2)
  float attention_scale = 0.0f;         // scale of Q.K; 0: 1/sqrt(head_dim)

  // Per layer: 0 for global attention, else the sliding window in tokens.
  std::vector<std::int64_t> sliding_window;
  // Per layer: true where the layer rotates nothing (SmolLM3's every fourth
  // layer); empty: every layer rotates.
  std::vector<bool> rope_skipped;

  // Scalars some families put on the residual stream, the attention scores
  // and the logits; the defaults change nothing.
  float embedding_scale = 1.0f;      // on the embeddings (Granite's embedding_multiplier)
  float residual_scale = 1.0f;       // on each block's output before it joins the stream (Granite)
  float attention_softcap = 0.0f;    // scores = cap * tanh(scores / cap) (Gemma 2); 0: none
  float logit_scale = 1.0f;          // on the logits (Granite: 1 / logits_scaling)
  float final_logit_softcap = 0.0f;  // logits = cap * tanh(logits / cap) (Gemma 2); 0: none

  // Mixture of experts (num_experts > 0): every layer's FFN is num_experts
  // SwiGLU experts of expert_intermediate_size, of which a router picks
  // num_experts_used per token, plus an optional shared expert (Qwen2-MoE).
  std::int64_t num_experts = 0;
  std::int64_t num_experts_used = 0;                 // k of the top-k
  std::int64_t expert_intermediate_size = 0;         // FFN width of one expert
  std::int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool expert_weights_norm = false;                  // top-k weights renormalised to sum to 1

  // DeepSeek's experts: the first num_dense_layers layers keep a dense FFN
  // of intermediate_size, and with grouped_routing the router is
  // Backend::moe_route_grouped's (its scale is routed_scaling_factor), with
  // the router's selection bias where the file has one and the shared
  // expert added without a gate.
  std::int64_t num_dense_layers = 0;
  bool grouped_routing = false;
  GroupedRouting routing;
  // Latent attention (DeepSeek-V2/V3; kv_lora_rank > 0): the model is run
  // as one K/V head of kv_lora_rank + rope.dim (the cache's latent and rotary
  // key) with values of kv_lora_rank, so head_dim, value_head_dim and
  // num_kv_heads say that; these are the checkpoint's own sizes.
  std::int64_t q_lora_rank = 0;         // 0: Q straight from the hidden state
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;    // Q/K head size without the rotary part
  std::int64_t mla_value_head_dim = 0;  // V head size once up-projected
  bool is_moe() const { return num_experts > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }

  // Hybrid models: true for each layer that is linear attention (empty: none).
  // Such a layer keeps a recurrent state (kv/StateStorage), no K and V.
  std::vector<bool> recurrent_layers;
  LinearAttentionConfig linear;
  bool is_recurrent(std::int64_t layer) const {
    return !recurrent_layers.empty() && recurrent_layers[static_cast<std::size_t>(layer)];
  }
  std::int64_t num_recurrent_layers() const {
    std::int64_t n = 0;
    for (bool r : recurrent_layers) n += r ? 1 : 0;
    return n;
  }
  // Bytes of recurrent state one running sequence holds over all layers.
  std::uint64_t recurrent_state_bytes_per_seq() const {
    return static_cast<std::uint64_t>(num_recurrent_layers()) * linear.state_bytes();
  }

  // Layers that differ from one another (Gemma 4: sliding-window layers with
  // heads of one size, global layers with larger heads and fewer of them, a
  // wider FFN on some). Each vector is empty where every layer has the
  // uniform value above; where it is not, the uniform value is the largest
  // (what the workspace is sized by).
  std::vector<std::int64_t> layer_head_dim;           // K and V head size of each layer
  std::vector<std::int64_t> layer_num_kv_heads;
  std::vector<std::int64_t> layer_intermediate_size;
  // Per layer: the layer whose KV cache it attends over. A layer that writes
  // its own names itself; Gemma 4's last layers name an earlier one and
  // write none, so the cache holds blocks for the writing layers only.
  // Empty: every layer writes its own.
  std::vector<std::int64_t> kv_source_layer;
  // Gemma 4's per-layer embeddings: numbers per layer per token (0: none).
  std::int64_t per_layer_input_size = 0;
  // RoPE base of the sliding-window layers where the config gives its own
  // (Gemma 4); 0: rope.base.
  float sliding_rope_base = 0.0f;
  // Gemma 4's global layers: of the rotary table's rope.dim / 2 pairs, the
  // first this many rotate and the rest by nothing ("proportional" RoPE); 0:
  // all rotate.
  std::int64_t rope_rotated_pairs = 0;

  std::int64_t head_dim_of(std::int64_t layer) const;
  std::int64_t value_head_dim_of(std::int64_t layer) const;
  std::int64_t num_kv_heads_of(std::int64_t layer) const;
  std::int64_t intermediate_size_of(std::int64_t layer) const;
  std::int64_t kv_layer_of(std::int64_t layer) const;
  // A layer writes K and V unless it reads an earlier layer's or is linear attention.
  bool writes_kv(std::int64_t layer) const { return kv_layer_of(layer) == layer && !is_recurrent(layer); }

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // KV bytes per token: over the layers that write a cache, kv_heads x
  // (head_dim + value_head_dim) x bytes per number.
  std::int64_t kv_bytes_per_token(double bytes_per_number) const;

  // Reads the `<arch>.*` keys common to decoder models; an architecture's
  // registry entry adjusts what is particular to it.
  static ModelConfig from_gguf(const GgufFile& file);
  // Reads the keys of a Hugging Face config.json common to decoder models
  // (architecture and name are left to the caller); an architecture's
  // registry entry adjusts what is particular to it.
  static ModelConfig from_hf(const HfConfig& config);
  // Sets rope.scaling and its parameters from the object at `prefix` of a
  // config.json (rope_scaling, rope_parameters or one layer type's), and
  // stretches context_length by YaRN's factor.
  void rope_scaling_from_hf(const HfConfig& config, const std::string& prefix);
  // The same from a GGUF file's <arch>.rope.scaling.* keys.
  void rope_scaling_from_gguf(const GgufFile& file);
  // Checks the scaling's parameters (throws an Error naming `source`) and
  // stretches context_length by YaRN's factor.
  void finish_rope(const std::string& source);
  // Reads a mixture of experts' keys of a config.json (num_experts or
  // num_local_experts, num_experts_per_tok, moe_intermediate_size,
  // shared_expert_intermediate_size, norm_topk_prob with `norm_default`) and
  // refuses dense layers among sparse ones, which folio does not run.
  void experts_from_hf(const HfConfig& config, bool norm_default);
  // Checks the expert counts: k in [1, num_experts], widths positive; throws
  // an Error naming `source`.
  void check_experts(const std::string& source) const;
};

}  // namespace folio
