// ThreadPool: persistent worker threads that run one job at a time on every
// thread, the caller included. Work is split statically, so which thread
// computes which output never depends on timing (results stay reproducible).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace folio {

class ThreadPool {
 public:
  // num_threads counts the calling thread; 0 means one per hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Runs fn(thread_index) once on each thread (the caller is index 0) and
  // returns when all have finished.
  template <typename F>
  void run(F&& fn) {
    if (num_threads_ == 1) {
      fn(0);
      return;
    }
    auto trampoline = [](void* ctx, int index) { (*static_cast<F*>(ctx))(index); };
    dispatch(trampoline, &fn);
  }

  // Splits [0, n) into one contiguous range per thread (in thread order,
  // ranges rounded to multiples of `grain`) and calls fn(begin, end) on each
  // non-empty one.
  template <typename F>
  void parallel_for(std::int64_t n, F&& fn, std::int64_t grain = 1) {
    if (n <= 0) return;
    std::int64_t chunks = (n + grain - 1) / grain;
    int used = static_cast<int>(std::min<std::int64_t>(num_threads_, chunks));
    if (used <= 1) {
      fn(std::int64_t{0}, n);
      return;
    }
    run([&](int t) {
      if (t >= used) return;
      std::int64_t begin = chunks * t / used * grain;
      std::int64_t end = std::min(n, chunks * (t + 1) / used * grain);
      if (begin < end) fn(begin, end);
    });
  }

 private:
  using JobFn = void (*)(void*, int);
  void dispatch(JobFn fn, void* ctx);
  void worker(int index);

  int num_threads_;
  std::vector<std::thread> threads_;
  JobFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace folio
