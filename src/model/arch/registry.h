// The architecture registry: the name in general.architecture (GGUF) or the
// model class in config.json (Hugging Face) -> how to finish the config and
// build the model. A new architecture is a new file in model/arch/ plus one
// line in registry.cc.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model/weights.h"

namespace folio {

class HfCheckpoint;
class HfConfig;
struct SafetensorsTensor;

struct ArchEntry {
  std::string_view name;
  // Adds what is particular to the architecture to a config read generically.
  void (*configure)(ModelConfig& config, const GgufFile& file);
  std::unique_ptr<Model> (*create)(const ModelConfig& config, const Weights& weights, Backend& backend);
  // Hugging Face: the model class of config.json's "architectures" (empty:
  // not read from HF checkpoints), and what is particular to the architecture
  // in config.json, on top of ModelConfig::from_hf.
  std::string_view hf_class = {};
  void (*configure_hf)(ModelConfig& config, const HfConfig& hf) = nullptr;
  // HF stores the norm weights as w of (1 + w), and post_attention_layernorm
  // is the norm after attention, not the one before the FFN (Gemma).
  bool hf_gemma_norms = false;
  // post_attention_layernorm is the norm after attention (OLMo 2), with the
  // weights as they are.
  bool hf_post_attention_norm = false;
  // Splits the fused tensors both formats keep (Phi-3's qkv and gate_up,
  // GLM-4's gate_up) into the ones the model reads, while the weights are
  // still on the host (Weights::split_rows: views, no copies).
  void (*split_weights)(Weights& weights, const ModelConfig& config) = nullptr;
  // The family's name for people ("Gemma 2", "Phi-3 / Phi-4-mini"), shown by
  // folio inspect; empty: the architecture name says it.
  std::string_view family = {};
  // Takes a checkpoint tensor that no generic name maps into `weights`, in
  // folio's layout (gpt-oss's fused, transposed and MXFP4 experts); false
  // for a tensor it does not know either.
  bool (*hf_tensor)(Weights& weights, const HfCheckpoint& checkpoint, const SafetensorsTensor& tensor) = nullptr;
  // A vision-language class whose language model this architecture is
  // (Mistral3ForConditionalGeneration): its text_config and language-model
  // tensors are read, the vision tower and projector left out.
  std::string_view hf_vision_class = {};
};

// One entry per architecture file.
extern const ArchEntry kLlamaArch;
extern const ArchEntry kQwen2Arch;
extern const ArchEntry kQwen3Arch;
extern const ArchEntry kGemma3Arch;
extern const ArchEntry kMixtralArch;
extern const ArchEntry kQwen2MoeArch;
extern const ArchEntry kQwen3MoeArch;
extern const ArchEntry kGemma2Arch;
extern const ArchEntry kPhi3Arch;
extern const ArchEntry kGraniteArch;
extern const ArchEntry kSmolLM3Arch;
extern const ArchEntry kGlm4Arch;
extern const ArchEntry kMinistral3Arch;
extern const ArchEntry kMistralArch;
extern const ArchEntry kOlmo2Arch;
extern const ArchEntry kGranite4Arch;
extern const ArchEntry kGptOssArch;
extern const ArchEntry kDeepseek2Arch;  // DeepSeek-V2's class
extern const ArchEntry kDeepseek3Arch;  // DeepSeek-V3's class, the same architecture
extern const ArchEntry kGemma4Arch;
extern const ArchEntry kQwen35Arch;

// What the SwiGLU architectures check of a config.json: hidden_act silu
// (`arch` names the architecture in the error).
void require_hf_silu(const ModelConfig& config, const HfConfig& hf, std::string_view arch);
// Qwen's config.json can switch on a sliding window (use_sliding_window) that
// folio does not run; refused with `family` in the error.
void refuse_hf_qwen_sliding_window(const HfConfig& hf, std::string_view family);

const ArchEntry* find_arch(std::string_view name);
// The entry whose hf_class (or hf_vision_class) is `model_class`, or nullptr.
const ArchEntry* find_hf_arch(std::string_view model_class);
std::vector<std::string_view> hf_arch_names();
std::vector<std::string_view> arch_names();

}  // namespace folio
