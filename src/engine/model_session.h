// ModelSession: everything needed to run one model - the backend, the loaded
// weights and forward pass, the tokenizer and the chat template - opened once
// and shared by the engine, the CLI and the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/backend_factory.h"
#include "backend/observing_backend.h"
#include "engine/constraint/constraint_compiler.h"
#include "model/model_loader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace folio {

struct ModelSessionOptions {
  std::string model_path;  // a GGUF file or HF directory; with load_format "dummy", a preset name
  // "auto": read model_path; "dummy": random weights of the preset model_path
  // names, in the types of the dummy_weights recipe (model/dummy_model.h).
  std::string load_format = "auto";
  std::string dummy_weights = "q4_k_m";
  BackendOptions backend;            // which backend to make (make_backend)
  bool show_progress = false;        // a progress line on stderr while a large model loads
  // Shown every matmul (calibration); it must outlive the session.
  MatmulObserver* matmul_observer = nullptr;
  // Run on this backend instead of making one: a draft model shares its
  // target's device, threads and stream.
  std::shared_ptr<Backend> shared_backend;
};

struct ModelSession {
  std::shared_ptr<Backend> backend;
  BackendOptions backend_options;  // what it was made with
  LoadedModel loaded;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;
  // Structured outputs: constraints compiled against this tokenizer (its
  // vocabulary is read on the first compile).
  std::unique_ptr<ConstraintCompiler> constraints;
  double load_seconds = 0;

  const ModelConfig& config() const { return loaded.config; }
};

std::shared_ptr<ModelSession> open_model_session(const ModelSessionOptions& options);

// Peak resident memory of this process in bytes.
std::uint64_t peak_rss_bytes();

}  // namespace folio
