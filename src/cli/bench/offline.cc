#include "cli/bench/offline.h"

#include "cli/bench/dispatcher.h"

namespace folio::cli {

RunTimings run_offline(Engine& engine, const BenchWorkload& workload, int max_concurrency, BenchProgress& progress,
                       std::shared_ptr<const CompiledConstraint> constraint) {
  return dispatch_requests(workload, max_concurrency,
                           [&](const BenchRequest& request, BenchClock::time_point start, RequestTiming& timing) {
    EngineRequest r;
    r.prompt = request.prompt;
    r.params.temperature = 0;
    r.params.max_tokens = request.output_len;
    r.params.ignore_eos = request.ignore_eos;
    r.speculative = request.speculative;
    if (request.constrained) r.params.constraint = constraint;
    std::shared_ptr<RequestStream> stream = engine.submit(std::move(r));
    for (;;) {
      std::optional<RequestOutput> out = stream->next();
      if (!out) break;
      const double now = seconds_since(start);
      int tokens = 0;
      for (const CompletionDelta& d : out->deltas) {
        tokens += static_cast<int>(d.token_ids.size());
        timing.output_ids.insert(timing.output_ids.end(), d.token_ids.begin(), d.token_ids.end());
      }
      if (tokens > 0) {
        timing.event_times_s.push_back(now);
        timing.event_tokens.push_back(tokens);
        timing.output_tokens += tokens;
        timing.finish_s = now;
        progress.add_tokens(tokens);
      }
      if (!out->error.empty()) timing.error = out->error;
      if (out->finished) break;
    }
    if (timing.error.empty() && request.ignore_eos && !request.constrained && timing.output_tokens != request.output_len)
      timing.error = "the engine returned " + std::to_string(timing.output_tokens) + " tokens instead of " +
                     std::to_string(request.output_len);
    progress.request_done();
  });
}

}  // namespace folio::cli
