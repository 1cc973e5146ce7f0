// run_generation: one GenerationJob through the engine and back to the
// client, streamed as server-sent events or as one JSON response. Each prompt
// becomes one engine request; a client that hangs up (seen by the
// DisconnectWatcher, or by a failed write) has every one of them aborted, so
// their KV blocks are freed within an engine step.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "server/disconnect_watcher.h"
#include "server/openai_request.h"
#include "server/server_counters.h"

namespace folio::server {

struct GenerationContext {
  std::shared_ptr<Engine> engine;
  DisconnectWatcher* watcher = nullptr;
  ServerCounters* counters = nullptr;
  std::string model_name;
  int socket = -1;  // the client's connection, watched while the job runs
};

// Submits the job and fills `res`: the whole JSON answer, or a content
// provider that streams it. Throws ApiError when the engine refuses (400
// invalid, 429 queue full, 503 draining). on_done runs exactly once, when the
// answer has been written or abandoned.
void run_generation(const GenerationContext& context, GenerationJob job, httplib::Response& res,
                    std::function<void()> on_done);

}  // namespace folio::server
