// BenchProgress: a progress bar on stderr while a benchmark runs (requests
// done, tokens, tokens/s), redrawn a few times a second by a thread of its
// own so that drivers only bump counters. Off when stderr is not a terminal
// or when asked, so that logs and --json runs stay clean.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace folio::cli {

class BenchProgress {
 public:
  BenchProgress(std::string label, int num_requests, std::int64_t num_output_tokens, bool enabled);
  ~BenchProgress();  // stops, leaving the final bar on its line
  BenchProgress(const BenchProgress&) = delete;
  BenchProgress& operator=(const BenchProgress&) = delete;

  void add_tokens(int n) { tokens_.fetch_add(n, std::memory_order_relaxed); }
  void request_done() { requests_.fetch_add(1, std::memory_order_relaxed); }

  // Whether a bar would be drawn by default: stderr is a terminal.
  static bool stderr_is_terminal();

 private:
  void draw(bool final);

  std::string label_;
  int num_requests_;
  std::int64_t num_output_tokens_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<int> requests_{0};
  std::atomic<std::int64_t> tokens_{0};
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace folio::cli
