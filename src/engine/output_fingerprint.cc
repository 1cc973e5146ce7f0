#include "engine/output_fingerprint.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <span>
#include <vector>

#include "core/version.h"
#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"

namespace folio {
namespace {

constexpr int kNumSamples = 64;
constexpr std::size_t kSampleBytes = 4096;
constexpr std::uint64_t kMaxHeaderBytes = 256ull << 20;    // a header is hashed whole up to this
constexpr std::uintmax_t kMaxSideFileBytes = 64ull << 20;  // a directory's other files, each

// 64-bit FNV-1a: stable across builds and machines, which std::hash is not.
class Fnv64 {
 public:
  void bytes(std::span<const std::uint8_t> data) {
    for (std::uint8_t b : data) h_ = (h_ ^ b) * 0x100000001B3ull;
  }
  void text(std::string_view s) {
    number(s.size());
    bytes({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()});
  }
  void number(std::uint64_t v) {
    std::uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<std::uint8_t>(v >> (8 * i));
    bytes(le);
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0xCBF29CE484222325ull;
};

// A mapped file: its size, its first `header` bytes whole, and samples spread over the rest.
void hash_file(Fnv64& h, std::span<const std::uint8_t> file, std::uint64_t header) {
  header = std::min<std::uint64_t>({header, file.size(), kMaxHeaderBytes});
  h.number(file.size());
  h.bytes(file.first(header));
  const std::uint64_t rest = file.size() - header;
  if (rest == 0) return;
  for (int i = 0; i <= kNumSamples; ++i) {
    // i = kNumSamples: the last bytes of the file.
    const std::uint64_t at = header + std::min(rest - std::min<std::uint64_t>(rest, kSampleBytes),
                                               rest / kNumSamples * static_cast<std::uint64_t>(i));
    h.bytes(file.subspan(at, std::min<std::uint64_t>(kSampleBytes, file.size() - at)));
  }
}

// A Hugging Face directory's files other than the weights (config.json,
// tokenizer.json, the template...), in name order.
void hash_side_files(Fnv64& h, const std::string& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec) || entry.path().extension() == ".safetensors") continue;
    if (entry.file_size(ec) > kMaxSideFileBytes) continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    h.text(path.filename().string());
    h.text(bytes);
  }
}

}  // namespace

OutputFingerprint output_fingerprint(const ModelSession& session, const EngineConfig& config,
                                     std::string_view chat_template) {
  Fnv64 h;
  const std::string build = fmt::format("folio {} {}", version_string(), git_commit());
  const std::string numerics = session.backend->numerics();
  const std::string kv = fmt::format("kv {} in blocks of {}", config.kv_dtype.name(), config.block_size);
  h.text(build);
  h.text(numerics);
  h.text(kv);

  const LoadedModel& m = session.loaded;
  if (m.file) hash_file(h, m.file->bytes(), m.file->data_offset());
  if (m.hf) {
    for (const auto& shard : m.hf->shards()) hash_file(h, shard->bytes(), shard->data_offset());
    hash_side_files(h, m.path);
  }
  if (!m.file && !m.hf) h.text(m.path);  // random weights of a preset: its name and the types below
  // The tensors as the backend holds them (their types after any widening).
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const auto& [name, tensor] : m.weights->tensors()) tensors.emplace_back(name, &tensor);
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [name, tensor] : tensors) {
    h.text(name);
    h.text(folio::name(tensor->dtype));
    h.number(static_cast<std::uint64_t>(tensor->ndim));
    for (int d = 0; d < tensor->ndim; ++d)
      h.number(static_cast<std::uint64_t>(tensor->shape[static_cast<std::size_t>(d)]));
  }
  h.text(chat_template);

  OutputFingerprint f;
  f.id = fmt::format("fp_{:016x}", h.value());
  f.description = fmt::format("{}; {}; {}; the model's bytes and tensor types; the chat template", build, numerics, kv);
  return f;
}

}  // namespace folio
