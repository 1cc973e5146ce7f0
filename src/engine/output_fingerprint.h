// OutputFingerprint: a short name ("fp_" and 16 hex digits, as OpenAI's
// system_fingerprint looks) for everything that decides the bits of an
// engine's outputs: the build, the backend's numerics (SIMD level, matmul
// precision, activation type, batch invariance, device), the KV cache types
// and block size, the model's bytes and tensor types, and the chat template.
// What does not change bits under docs/architecture.md rule 5 (threads,
// batching, chunked prefill, prefix hits, speculative decoding) is left out,
// so replicas that would give equal bits say the same fingerprint.
#pragma once

#include <string>
#include <string_view>

#include "engine/engine.h"
#include "engine/model_session.h"

namespace folio {

struct OutputFingerprint {
  std::string id;           // "fp_" + 16 hex digits
  std::string description;  // what it hashed, in words, for the start-up log
};

// The model's identity is read from its mapped files: each file's header
// whole (GGUF metadata and tensor infos, a safetensors header) and 64
// samples of 4 KiB spread over its tensor data, so that the cost stays a few
// megabytes read whatever the model's size; a Hugging Face directory's other
// files (config, tokenizer, template) whole.
OutputFingerprint output_fingerprint(const ModelSession& session, const EngineConfig& config,
                                     std::string_view chat_template);

}  // namespace folio
