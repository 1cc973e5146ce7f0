#include "engine/model_session.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "model/dummy_model.h"
#include "tokenizer/dummy_vocab.h"

namespace folio {
namespace {

// A live percentage for a person at a terminal while a large model loads;
// one line for a log; nothing for a small model.
LoadProgress progress_line(const std::string& path, bool show) {
  if (!show) return {};
  struct State {
    bool decided = false, live = false;
    int percent = -1;
  };
  auto state = std::make_shared<State>();
  return [path, state](std::uint64_t done, std::uint64_t total) {
    if (!state->decided) {
      state->decided = true;
      if (total <= (256u << 20)) return;
      state->live = ::isatty(STDERR_FILENO) != 0;
      if (!state->live)
        std::fprintf(stderr, "loading %s (%.0f MiB)\n", path.c_str(), static_cast<double>(total) / (1 << 20));
    }
    if (!state->live) return;
    const int percent = total == 0 ? 100 : static_cast<int>(100 * done / total);
    if (percent == state->percent) return;
    state->percent = percent;
    std::fprintf(stderr, "\rloading %s: %3d%%%s", path.c_str(), percent, percent == 100 ? "\n" : "");
  };
}

}  // namespace

std::shared_ptr<ModelSession> open_model_session(const ModelSessionOptions& o) {
  auto start = std::chrono::steady_clock::now();
  auto s = std::make_shared<ModelSession>();
  s->backend_options = o.backend;
  if (o.shared_backend) {
    s->backend = o.shared_backend;
  } else {
    std::unique_ptr<Backend> backend = make_backend(o.backend);
    if (o.matmul_observer != nullptr)
      backend = std::make_unique<ObservingBackend>(std::move(backend), *o.matmul_observer);
    s->backend = std::move(backend);
  }
  if (o.load_format == "dummy") {
    DummyModelOptions d;
    d.preset = o.model_path;
    d.weights = o.dummy_weights;
    s->loaded = load_dummy_model(d, *s->backend, progress_line("dummy " + o.model_path, o.show_progress));
  } else if (o.load_format == "auto") {
    s->loaded = load_model(o.model_path, *s->backend, progress_line(o.model_path, o.show_progress));
  } else {
    fail("--load-format \"{}\" is not known (auto reads the model; dummy makes random weights of a preset)",
         o.load_format);
  }
  if (!s->loaded.file && !s->loaded.hf) {
    s->tokenizer = Tokenizer::create(dummy_vocab(s->loaded.config.vocab_size));
    s->chat_template = std::make_unique<ChatTemplate>(ChatTemplate::chatml());
  } else if (s->loaded.file) {
    s->tokenizer = Tokenizer::create(Vocab::from_gguf(*s->loaded.file));
    s->chat_template = std::make_unique<ChatTemplate>(ChatTemplate::from_gguf(*s->loaded.file));
  } else {
    s->tokenizer = Tokenizer::create(Vocab::from_hf(s->loaded.hf->dir(), s->loaded.config.vocab_size));
    s->chat_template = std::make_unique<ChatTemplate>(ChatTemplate::from_hf(s->loaded.hf->dir()));
  }
  s->constraints = std::make_unique<ConstraintCompiler>(*s->tokenizer, s->loaded.config.vocab_size);
  s->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

std::uint64_t peak_rss_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace folio
