// run_generation: one GenerationJob through the engine and back to the
// client, streamed as server-sent events or as one JSON response. Each prompt
// becomes one engine request; a client that is gone (a reset, a failed write,
// a stream it stopped reading) has every one of them aborted, so their KV
// blocks are freed within an engine step.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api/generation_job.h"
#include "server/api/server_counters.h"
#include "server/http/http_server.h"

namespace folio::server {

struct GenerationContext {
  std::shared_ptr<Engine> engine;
  ServerCounters* counters = nullptr;
  std::string model_name;
  std::string system_fingerprint;  // OutputFingerprint's id: on every OpenAI-shaped answer
};

// How a job's answer is written for one API surface: OpenAI's chat and
// completions (the default), Anthropic's messages.
class AnswerShape {
 public:
  virtual ~AnswerShape() = default;
  // Streaming, as server-sent events (whole events, each ending in a blank line).
  virtual std::string opening_events() = 0;
  virtual std::string delta_events(int prompt, const CompletionDelta& delta) = 0;
  virtual std::string error_event(int status, const std::string& message) = 0;
  virtual std::string closing_events(const Usage& usage) = 0;
  // Not streaming: every delta, then the whole answer.
  virtual void add(int prompt, const CompletionDelta& delta) = 0;
  // Not streaming, before the prompt's deltas: its prompt logprobs, when the
  // job asked for them (shapes that do not return them ignore them).
  virtual void add_prompt_logprobs(int /*prompt*/, std::span<const PromptTokenLogprob> /*logprobs*/) {}
  virtual std::string response(const Usage& usage) = 0;
  // Per finished choice, in OpenAI's words ("stop", "length", "tool_calls", "abort").
  virtual std::vector<std::string> finish_reasons() const = 0;
};
using ShapeMaker = std::function<std::unique_ptr<AnswerShape>(const GenerationJob& job, const Tokenizer& tokenizer,
                                                              const GenerationContext& context)>;

// Submits the job and answers through `exchange`, returning once the answer
// is written or abandoned. Throws ApiError before anything is sent when the
// engine refuses (400 invalid, 429 queue full, 503 draining). `shape`: how
// the answer is written (empty: OpenAI's shapes for the job's endpoint).
void run_generation(const GenerationContext& context, GenerationJob job, HttpExchange& exchange,
                    const ShapeMaker& shape = {});

}  // namespace folio::server
