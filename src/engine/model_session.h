// ModelSession: everything needed to run one model - the backend, the loaded
// weights and forward pass, the tokenizer and the chat template - opened once
// and shared by the engine, the CLI and the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/observing_backend.h"
#include "model/model_loader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace folio {

struct ModelSessionOptions {
  std::string model_path;
  std::string backend = "cpu";       // cpu or reference
  int threads = 0;                   // 0: one per hardware thread
  std::string precision = "q8";      // matmul activations: q8 (fast) or f32 (accurate)
  std::string cpu_level;             // cap on the SIMD level: avx512, avx2, scalar
  bool show_progress = false;        // a progress line on stderr while the file is read
  // Shown every matmul (calibration); it must outlive the session.
  MatmulObserver* matmul_observer = nullptr;
};

struct ModelSession {
  std::unique_ptr<Backend> backend;
  LoadedModel loaded;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;
  double load_seconds = 0;

  const ModelConfig& config() const { return loaded.config; }
};

std::shared_ptr<ModelSession> open_model_session(const ModelSessionOptions& options);

// Peak resident memory of this process in bytes.
std::uint64_t peak_rss_bytes();

}  // namespace folio
