// The architecture registry: the name in general.architecture -> how to
// finish the config and build the model. A new architecture is a new file in
// model/arch/ plus one line in registry.cc.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "model/weights.h"

namespace folio {

struct ArchEntry {
  std::string_view name;
  // Adds what is particular to the architecture to a config read generically.
  void (*configure)(ModelConfig& config, const GgufFile& file);
  std::unique_ptr<Model> (*create)(const ModelConfig& config, const Weights& weights, Backend& backend);
};

// One entry per architecture file.
extern const ArchEntry kLlamaArch;
extern const ArchEntry kQwen2Arch;
extern const ArchEntry kGemma3Arch;

const ArchEntry* find_arch(std::string_view name);
std::vector<std::string_view> arch_names();

}  // namespace folio
