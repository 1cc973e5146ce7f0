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

// GGUF's rope_freqs.weight (Llama 3) and rope_factors_short/long.weight
// (LongRoPE) are tables of the config, not weights the ops read: they go into
// the config while the weights are still on the host.
std::vector<float> read_pair_factors(const Weights& weights, const char* tensor, std::int64_t pairs) {
  const Tensor* t = weights.find(tensor);
  if (t == nullptr) return {};
  if (t->ndim != 1 || t->shape[0] != pairs || t->dtype != DType::F32)
    fail("{}: {} is {} {}, expected f32 [{}] (one factor per rotated pair)", weights.source(), tensor,
         t->shape_string(), name(t->dtype), pairs);
  const auto* factors = static_cast<const float*>(t->data);
  return std::vector<float>(factors, factors + pairs);
}

void read_rope_freq_factors(ModelConfig& config, const Weights& weights) {
  const std::int64_t n = config.rope.dim / 2;
  config.rope.freq_factors = read_pair_factors(weights, "rope_freqs.weight", n);
  // llama.cpp's Phi-3 files name no scaling type: the factors' tensors are
  // the LongRoPE (and rope.scaling.attn_factor its attention factor).
  const bool factor_tensors = weights.find("rope_factors_long.weight") != nullptr;
  if (config.rope.scaling == RopeScaling::kNone && factor_tensors && config.rope.short_factors.empty()) {
    config.rope.scaling = RopeScaling::kLongRope;
    config.rope.factor =
        static_cast<float>(static_cast<double>(config.context_length) / static_cast<double>(config.rope.original_context));
  }
  if (config.rope.scaling != RopeScaling::kLongRope || !config.rope.short_factors.empty()) return;
  config.rope.short_factors = read_pair_factors(weights, "rope_factors_short.weight", n);
  config.rope.long_factors = read_pair_factors(weights, "rope_factors_long.weight", n);
  if (config.rope.short_factors.empty() || config.rope.long_factors.empty())
    fail("{}: longrope scaling needs the tensors rope_factors_short.weight and rope_factors_long.weight",
         weights.source());
  config.finish_rope(weights.source());
}

}  // namespace

std::vector<std::span<const std::uint8_t>> LoadedModel::mapped_bytes() const {
  std::vector<std::span<const std::uint8_t>> out;
  if (file) out.push_back(file->bytes());
  if (hf)
    for (const auto& shard : hf->shards()) out.push_back(shard->bytes());
  return out;
}

LoadedModel load_model(const std::string& path, Backend& backend, const LoadProgress& progress) {
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
    if (const std::int64_t parts = m.file->get_int("split.count", 1); parts > 1)
      fail("{} is part {} of {} of a split GGUF file, which folio does not load yet: join the parts into one file "
           "with llama.cpp's llama-gguf-split --merge",
           path, m.file->get_int("split.no", 0) + 1, parts);
    m.config = ModelConfig::from_gguf(*m.file);
    arch = find_arch(m.config.architecture);
    if (arch == nullptr)
      fail("{}: architecture \"{}\" is not supported (supported: {})", path, m.config.architecture,
           joined(arch_names()));
    arch->configure(m.config, *m.file);
    weights = Weights::from_gguf(m.file);
  }
  read_rope_freq_factors(m.config, weights);
  if (arch->split_weights != nullptr) arch->split_weights(weights, m.config);
  weights.load(backend, progress);
  m.weights = std::make_shared<const Weights>(std::move(weights));
  m.model = arch->create(m.config, *m.weights, backend);
  m.config = m.model->config();
  return m;
}

}  // namespace folio
