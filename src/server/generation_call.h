// run_generation: one GenerationJob through the engine and back to the
// client, streamed as server-sent events or as one JSON response. Each prompt
// becomes one engine request; a client that is gone (a reset, a failed write,
// a stream it stopped reading) has every one of them aborted, so their KV
// blocks are freed within an engine step.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/server_counters.h"

namespace folio::server {

struct GenerationContext {
  std::shared_ptr<Engine> engine;
  ServerCounters* counters = nullptr;
  std::string model_name;
};

// Submits the job and answers through `exchange`, returning once the answer
// is written or abandoned. Throws ApiError before anything is sent when the
// engine refuses (400 invalid, 429 queue full, 503 draining).
void run_generation(const GenerationContext& context, GenerationJob job, HttpExchange& exchange);

}  // namespace folio::server
