// ModelConfig: a model's hyper-parameters, normalised across file formats so
// that nothing above the loader knows where they came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace folio {

class GgufFile;
class HfConfig;

// How RoPE pairs the dimensions of a head: kNormal rotates (2i, 2i+1) (GGUF
// llama files, whose Q/K rows the converter permuted), kNeox rotates
// (i, i + rot_dim/2) (Qwen2, Gemma, and every Hugging Face checkpoint, whose
// rotate_half works on the rows as trained).
enum class RopeStyle { kNormal, kNeox };

enum class RopeScaling { kNone, kLinear, kYarn, kLlama3 };

struct RopeConfig {
  RopeStyle style = RopeStyle::kNormal;
  float base = 10000.0f;
  int dim = 0;  // dimensions rotated per head (<= head_dim)
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.0f;             // linear / yarn / llama3 scale factor
  std::int64_t original_context = 0;
  float low_freq_factor = 1.0f;    // llama3
  float high_freq_factor = 4.0f;   // llama3
  // Per rotated pair, a divisor of its frequency (GGUF's rope_freqs.weight,
  // read from the file before the weights go to the device); empty: none.
  std::vector<float> freq_factors;  // [dim / 2]
};

enum class Activation { kSilu, kGeluTanh };

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
  std::int64_t context_length = 0;      // trained context
  float rms_norm_eps = 1e-5f;
  RopeConfig rope;
  Activation activation = Activation::kSilu;
  bool tied_embeddings = false;         // output projection shares token_embd
  bool attention_bias = false;          // Q/K/V carry biases (qwen2)
  float attention_scale = 0.0f;         // scale of Q.K; 0: 1/sqrt(head_dim)

  // Per layer: 0 for global attention, else the sliding window in tokens.
  std::vector<std::int64_t> sliding_window;

  // Mixture of experts (num_experts > 0): every layer's FFN is num_experts
  // SwiGLU experts of expert_intermediate_size, of which a router picks
  // num_experts_used per token, plus an optional shared expert (Qwen2-MoE).
  std::int64_t num_experts = 0;
  std::int64_t num_experts_used = 0;                 // k of the top-k
  std::int64_t expert_intermediate_size = 0;         // FFN width of one expert
  std::int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool expert_weights_norm = false;                  // top-k weights renormalised to sum to 1

  bool is_moe() const { return num_experts > 0; }

  std::int64_t q_dim() const { return num_heads * head_dim; }
  std::int64_t kv_dim() const { return num_kv_heads * head_dim; }
  // KV bytes per token: 2 x layers x kv_heads x head_dim x bytes per number.
  std::int64_t kv_bytes_per_token(double bytes_per_number) const;

  // Reads the `<arch>.*` keys common to decoder models; an architecture's
  // registry entry adjusts what is particular to it.
  static ModelConfig from_gguf(const GgufFile& file);
  // Reads the keys of a Hugging Face config.json common to decoder models
  // (architecture and name are left to the caller); an architecture's
  // registry entry adjusts what is particular to it.
  static ModelConfig from_hf(const HfConfig& config);
  // Sets rope.scaling and its parameters from the object at `prefix` of a
  // config.json (rope_scaling, rope_parameters or one layer type's).
  void rope_scaling_from_hf(const HfConfig& config, const std::string& prefix);
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
