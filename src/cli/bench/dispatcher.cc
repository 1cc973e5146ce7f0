#include "cli/bench/dispatcher.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace folio::cli {

double seconds_since(BenchClock::time_point start) {
  return std::chrono::duration<double>(BenchClock::now() - start).count();
}

RunTimings dispatch_requests(const BenchWorkload& workload, int max_concurrency, const SendRequest& send) {
  const std::size_t n = workload.requests.size();
  RunTimings run;
  run.requests.resize(n);
  std::mutex mutex;
  std::condition_variable slot_free;
  int in_flight = 0;
  std::vector<std::thread> threads;
  threads.reserve(n);
  const auto start = BenchClock::now();
  for (std::size_t i = 0; i < n; ++i) {
    const BenchRequest& request = workload.requests[i];
    std::this_thread::sleep_until(start + std::chrono::duration_cast<BenchClock::duration>(
                                              std::chrono::duration<double>(request.arrival_s)));
    {
      std::unique_lock lock(mutex);
      slot_free.wait(lock, [&] { return max_concurrency <= 0 || in_flight < max_concurrency; });
      ++in_flight;
    }
    RequestTiming& timing = run.requests[i];
    timing.arrival_s = request.arrival_s;
    timing.prompt_tokens = static_cast<int>(request.prompt.size());
    timing.submit_s = seconds_since(start);
    threads.emplace_back([&, i] {
      try {
        send(workload.requests[i], start, run.requests[i]);
      } catch (const std::exception& e) {
        run.requests[i].error = e.what();
      }
      {
        std::lock_guard lock(mutex);
        --in_flight;
      }
      slot_free.notify_one();
    });
  }
  for (std::thread& t : threads) t.join();
  double first_submit = run.requests.empty() ? 0 : run.requests.front().submit_s, last_finish = 0;
  for (const RequestTiming& t : run.requests) last_finish = std::max(last_finish, t.finish_s);
  run.duration_s = std::max(0.0, last_finish - first_submit);
  return run;
}

}  // namespace folio::cli
