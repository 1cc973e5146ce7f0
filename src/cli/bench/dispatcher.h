// dispatch_requests: sends a workload's requests the way a client population
// would - each at its arrival time, at most max_concurrency in flight - with
// one thread per request in flight, and gathers their timings. The drivers
// (in-process engine, HTTP server) only say how to send one request.
#pragma once

#include <chrono>
#include <functional>

#include "cli/bench/report.h"
#include "cli/bench/workload.h"

namespace folio::cli {

using BenchClock = std::chrono::steady_clock;

// Sends one request and fills its timing (times in seconds from `start`;
// submit_s is already set); sets timing.error instead of throwing.
using SendRequest = std::function<void(const BenchRequest& request, BenchClock::time_point start, RequestTiming& timing)>;

// max_concurrency <= 0: no limit.
RunTimings dispatch_requests(const BenchWorkload& workload, int max_concurrency, const SendRequest& send);

// Seconds from `start` to now.
double seconds_since(BenchClock::time_point start);

}  // namespace folio::cli
