#include "model/arch/registry.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "model/hf_config.h"

namespace folio {

void require_hf_silu(const ModelConfig& config, const HfConfig& hf, std::string_view arch) {
  if (config.activation != Activation::kSilu) fail("{}: a {} model needs hidden_act silu", hf.source(), arch);
}

void refuse_hf_qwen_sliding_window(const HfConfig& hf, std::string_view family) {
  if (hf.get_bool("use_sliding_window", false))
    fail("{}: {}'s sliding window (use_sliding_window) is not supported", hf.source(), family);
}

namespace {
const std::array<const ArchEntry*, 21> kArchs = {
    &kLlamaArch,   &kQwen2Arch,  &kQwen3Arch,      &kGemma3Arch,  &kMixtralArch, &kQwen2MoeArch,
    &kQwen3MoeArch, &kGemma2Arch, &kPhi3Arch,       &kGraniteArch, &kSmolLM3Arch, &kGlm4Arch,
    &kMinistral3Arch, &kMistralArch, &kOlmo2Arch,  &kGranite4Arch, &kGptOssArch, &kGemma4Arch,
    &kDeepseek2Arch, &kDeepseek3Arch, &kQwen35Arch};
}

const ArchEntry* find_arch(std::string_view name) {
  for (const ArchEntry* a : kArchs)
    if (a->name == name) return a;
  return nullptr;
}

std::vector<std::string_view> arch_names() {
  std::vector<std::string_view> names;
  for (const ArchEntry* a : kArchs)
    if (std::find(names.begin(), names.end(), a->name) == names.end()) names.push_back(a->name);  // deepseek2 twice
  return names;
}

const ArchEntry* find_hf_arch(std::string_view model_class) {
  for (const ArchEntry* a : kArchs)
    if ((!a->hf_class.empty() && a->hf_class == model_class) ||
        (!a->hf_vision_class.empty() && a->hf_vision_class == model_class))
      return a;
  return nullptr;
}

std::vector<std::string_view> hf_arch_names() {
  std::vector<std::string_view> names;
  for (const ArchEntry* a : kArchs) {
    if (!a->hf_class.empty()) names.push_back(a->hf_class);
    if (!a->hf_vision_class.empty()) names.push_back(a->hf_vision_class);
  }
  return names;
}

}  // namespace folio
