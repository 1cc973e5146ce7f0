#include "model/arch/registry.h"

#include <array>

namespace folio {

namespace {
const std::array<const ArchEntry*, 3> kArchs = {&kLlamaArch, &kQwen2Arch, &kGemma3Arch};
}

const ArchEntry* find_arch(std::string_view name) {
  for (const ArchEntry* a : kArchs)
    if (a->name == name) return a;
  return nullptr;
}

std::vector<std::string_view> arch_names() {
  std::vector<std::string_view> names;
  for (const ArchEntry* a : kArchs) names.push_back(a->name);
  return names;
}

}  // namespace folio
