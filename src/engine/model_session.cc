#include "engine/model_session.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"


namespace folio {
namespace {

// Reads every page of the mapped files so that the first forward pass does
// not pay for disk reads; shows progress for models that take a while.
void warm_pages(const std::string& path, const std::vector<std::span<const std::uint8_t>>& files,
                bool show_progress) {
  std::size_t total = 0;
  for (const auto& bytes : files) total += bytes.size();
  if (total == 0) return;
  for (const auto& bytes : files)
    if (!bytes.empty()) ::madvise(const_cast<std::uint8_t*>(bytes.data()), bytes.size(), MADV_WILLNEED);
  // A live percentage for a person at a terminal; one line for a log.
  const bool large = show_progress && total > (256u << 20);
  const bool show = large && ::isatty(STDERR_FILENO) != 0;
  if (large && !show)
    std::fprintf(stderr, "loading %s (%.0f MiB)\n", path.c_str(), static_cast<double>(total) / (1 << 20));
  volatile std::uint8_t sink = 0;
  constexpr std::size_t kPage = 4096, kStep = 64u << 20;
  std::size_t done = 0;
  for (const auto& bytes : files) {
    for (std::size_t off = 0; off < bytes.size(); off += kPage, done += kPage) {
      sink = sink + bytes[off];
      if (show && done % kStep == 0)
        std::fprintf(stderr, "\rloading %s: %3.0f%%", path.c_str(),
                     100.0 * static_cast<double>(done) / static_cast<double>(total));
    }
  }
  if (show) std::fprintf(stderr, "\rloading %s: 100%%\n", path.c_str());
}

MatmulPrecision parse_precision(const std::string& p) {
  if (p == "q8") return MatmulPrecision::kQ8;
  if (p == "f32") return MatmulPrecision::kF32;
  fail("unknown precision \"{}\" (q8 and f32 are available)", p);
}

}  // namespace

std::shared_ptr<ModelSession> open_model_session(const ModelSessionOptions& o) {
  auto start = std::chrono::steady_clock::now();
  auto s = std::make_shared<ModelSession>();
  if (o.backend == "cpu") {
    s->backend = std::make_unique<CpuBackend>(o.threads, o.cpu_level, parse_precision(o.precision));
  } else {
    s->backend = make_backend(o.backend, o.threads);
  }
  if (o.matmul_observer != nullptr)
    s->backend = std::make_unique<ObservingBackend>(std::move(s->backend), *o.matmul_observer);
  s->loaded = load_model(o.model_path, *s->backend);
  warm_pages(o.model_path, s->loaded.mapped_bytes(), o.show_progress);
  if (s->loaded.file) {
    s->tokenizer = Tokenizer::create(Vocab::from_gguf(*s->loaded.file));
    s->chat_template = std::make_unique<ChatTemplate>(ChatTemplate::from_gguf(*s->loaded.file));
  } else {
    s->tokenizer = Tokenizer::create(Vocab::from_hf(s->loaded.hf->dir(), s->loaded.config.vocab_size));
    s->chat_template = std::make_unique<ChatTemplate>(ChatTemplate::from_hf(s->loaded.hf->dir()));
  }
  s->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

std::uint64_t peak_rss_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace folio
