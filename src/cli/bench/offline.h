// run_offline: a workload through an Engine in this process, greedy, with
// end-of-generation ignored where the request says so (random-token prompts,
// so that every output has its set length); timings
// are taken by the client threads reading the request streams, as a caller of
// Engine::submit sees them.
#pragma once

#include "cli/bench/progress.h"
#include "cli/bench/report.h"
#include "cli/bench/workload.h"
#include "engine/engine.h"

namespace folio::cli {

// constraint: the output of every request marked constrained follows it.
RunTimings run_offline(Engine& engine, const BenchWorkload& workload, int max_concurrency, BenchProgress& progress,
                       std::shared_ptr<const CompiledConstraint> constraint = nullptr);

}  // namespace folio::cli
