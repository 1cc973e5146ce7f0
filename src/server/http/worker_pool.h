// WorkerPool: threads for request handlers, started as the load needs them up
// to a bound and kept for the next burst. Jobs beyond the bound wait in order.
// The destructor runs every queued job and joins every thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace folio::server {

class WorkerPool {
 public:
  explicit WorkerPool(int max_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(std::function<void()> job);
  int num_threads() const;

 private:
  void run();

  const int max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  int num_idle_ = 0;
  bool stop_ = false;
};

}  // namespace folio::server
