#include "model/model_loader.h"

#include <fmt/format.h>

#include "core/error.h"
#include "model/arch/registry.h"

namespace folio {

LoadedModel load_model(const std::string& path, Backend& backend) {
  if (backend.device() != Device::kCpu) fail("backend {} cannot load weights yet", backend.name());
  LoadedModel m;
  m.file = std::make_shared<const GgufFile>(GgufFile::open(path));
  m.config = ModelConfig::from_gguf(*m.file);
  const ArchEntry* arch = find_arch(m.config.architecture);
  if (arch == nullptr) {
    std::string known;
    for (auto n : arch_names()) known += fmt::format("{}{}", known.empty() ? "" : ", ", n);
    fail("{}: architecture \"{}\" is not supported (supported: {})", path, m.config.architecture, known);
  }
  arch->configure(m.config, *m.file);
  Weights weights = Weights::from_gguf(m.file);
  weights.prepare(backend);
  m.weights = std::make_shared<const Weights>(std::move(weights));
  m.model = arch->create(m.config, *m.weights, backend);
  m.config = m.model->config();
  return m;
}

}  // namespace folio
