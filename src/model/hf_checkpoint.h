// HfCheckpoint: a Hugging Face model directory - config.json and the weights
// in model.safetensors or in the shards model.safetensors.index.json lists -
// with every shard validated and memory-mapped. Tensors keep their HF names
// here; hf_weights() maps them onto the GGUF names folio's architectures use.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/hf_config.h"
#include "model/hf_quantization.h"
#include "model/safetensors_file.h"

namespace folio {

class Weights;
struct ArchEntry;

class HfCheckpoint : public HfTensorSource {
 public:
  // Opens `dir`; throws Error naming the file at fault.
  static std::shared_ptr<const HfCheckpoint> open(const std::string& dir);

  const std::string& dir() const override { return dir_; }
  const HfConfig& config() const { return config_; }
  // config.json's quantization_config (kNone when absent), read at open.
  const HfQuantization& quantization() const override { return quantization_; }
  const std::vector<std::shared_ptr<const SafetensorsFile>>& shards() const { return shards_; }
  // A tensor by its HF name, in whichever shard holds it.
  const SafetensorsTensor* find_tensor(std::string_view name) const override;
  // Every tensor with the shard it lies in, shards in order.
  std::vector<const SafetensorsTensor*> tensors() const;
  std::uint64_t total_bytes() const;

 private:
  HfCheckpoint(std::string dir, HfConfig config)
      : dir_(std::move(dir)), config_(std::move(config)), quantization_(HfQuantization::from_config(config_)) {}

  std::string dir_;
  HfConfig config_;
  HfQuantization quantization_;
  std::vector<std::shared_ptr<const SafetensorsFile>> shards_;
  std::unordered_map<std::string, const SafetensorsTensor*> tensors_;
};

// Whether `path` is a directory (a Hugging Face checkpoint, not a GGUF file).
bool is_model_directory(const std::string& path);

// "model.layers.N.<rest>" -> N and rest; false for other names.
bool split_hf_layer_name(std::string_view hf, unsigned& layer, std::string_view& rest);

// The GGUF name of an HF decoder tensor ("model.layers.3.self_attn.q_proj.weight"
// -> "blk.3.attn_q.weight"), or "" for a name folio has no use for.
// gemma_norms: post_attention_layernorm is the norm after attention (Gemma,
// OLMo 2), not the one before the FFN (llama). A vision-language checkpoint's
// language model (model.language_model.*, language_model.model.*) maps as a
// text one's; its vision tower and projector map to "" and are left out.
std::string gguf_tensor_name(std::string_view hf_name, bool gemma_norms);

// One expert's projection of an HF mixture of experts
// ("model.layers.3.mlp.experts.5.up_proj.weight"): the stacked GGUF tensor it
// belongs to ("blk.3.ffn_up_exps.weight") and its index there (5).
struct HfExpertTensor {
  std::string gguf_name;
  std::int64_t expert = 0;
};
std::optional<HfExpertTensor> hf_expert_tensor(std::string_view hf_name);

// The checkpoint's tensors under their GGUF names, as folio's architectures
// read them: views of the mapped shards, except that 1-D tensors (norms,
// biases) become f32 copies, Gemma's norms (1 + w), the experts of each
// projection are stacked into one [experts, out, in] copy, and lm_head is left
// out when the config ties it to the embeddings. Quantized weights (FP8,
// bitsandbytes 4-bit) are widened into float copies (hf_quantization.h).
// Tensors no generic name maps go to the architecture's hf_tensor (gpt-oss's
// experts, MXFP4 ones included).
Weights hf_weights(std::shared_ptr<const HfCheckpoint> checkpoint, const ArchEntry& arch);

}  // namespace folio
