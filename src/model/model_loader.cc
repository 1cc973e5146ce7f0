#include "model/model_loader.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "model/arch/registry.h"

namespace folio {
namespace {

std::string joined(const std::vector<std::string_view>& names) {
  std::string out;
  for (auto n : names) out += fmt::format("{}{}", out.empty() ? "" : ", ", n);
  return out;
}

}  // namespace

std::vector<std::span<const std::uint8_t>> LoadedModel::mapped_bytes() const {
  std::vector<std::span<const std::uint8_t>> out;
  if (file) out.push_back(file->bytes());
  if (hf)
    for (const auto& shard : hf->shards()) out.push_back(shard->bytes());
  return out;
}

LoadedModel load_model(const std::string& path, Backend& backend) {
  if (backend.device() != Device::kCpu) fail("backend {} cannot load weights yet", backend.name());
  LoadedModel m;
  m.path = path;
  const ArchEntry* arch = nullptr;
  Weights weights;
  if (is_model_directory(path)) {
    m.hf = HfCheckpoint::open(path);
    const std::string model_class = m.hf->config().architecture();
    arch = find_hf_arch(model_class);
    if (arch == nullptr)
      fail("{}: model class \"{}\" is not supported (supported: {})", path, model_class, joined(hf_arch_names()));
    m.config = ModelConfig::from_hf(m.hf->config());
    m.config.architecture = std::string(arch->name);
    m.config.name = std::filesystem::path(path).lexically_normal().filename().string();
    if (m.config.name.empty()) m.config.name = std::filesystem::path(path).parent_path().filename().string();
    arch->configure_hf(m.config, m.hf->config());
    weights = hf_weights(m.hf, *arch);
  } else {
    m.file = std::make_shared<const GgufFile>(GgufFile::open(path));
    m.config = ModelConfig::from_gguf(*m.file);
    arch = find_arch(m.config.architecture);
    if (arch == nullptr)
      fail("{}: architecture \"{}\" is not supported (supported: {})", path, m.config.architecture,
           joined(arch_names()));
    arch->configure(m.config, *m.file);
    weights = Weights::from_gguf(m.file);
  }
  weights.prepare(backend);
  m.weights = std::make_shared<const Weights>(std::move(weights));
  m.model = arch->create(m.config, *m.weights, backend);
  m.config = m.model->config();
  return m;
}

}  // namespace folio
