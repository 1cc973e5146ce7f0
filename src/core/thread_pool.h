// ThreadPool: persistent worker threads that share the chunks of one job
// with the calling thread. Chunks are claimed dynamically, so a worker the OS
// has not scheduled never holds the caller up (it only waits for chunks
// already claimed). Which thread runs a chunk never changes what the chunk
// computes: callers give each output to exactly one chunk, so results are
// reproducible whatever the timing and the thread count.
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

  // Calls fn(chunk, thread) once for every chunk in [0, num_chunks), on the
  // caller and the workers; thread (0 .. size()-1) indexes per-thread scratch.
  // Returns when every chunk is done.
  template <typename F>
  void run_chunks(std::int64_t num_chunks, F&& fn) {
    if (num_chunks <= 0) return;
    if (num_threads_ == 1 || num_chunks == 1) {
      for (std::int64_t c = 0; c < num_chunks; ++c) fn(c, 0);
      return;
    }
    auto trampoline = [](void* ctx, std::int64_t chunk, int thread) { (*static_cast<F*>(ctx))(chunk, thread); };
    dispatch(trampoline, &fn, num_chunks);
  }

  // Splits [0, n) into contiguous ranges of at least `grain` items (a few per
  // thread, for balance) and calls fn(begin, end) on each.
  template <typename F>
  void parallel_for(std::int64_t n, F&& fn, std::int64_t grain = 1) {
    if (n <= 0) return;
    grain = std::max<std::int64_t>(grain, 1);
    const std::int64_t units = (n + grain - 1) / grain;
    const std::int64_t chunks = std::min<std::int64_t>(units, static_cast<std::int64_t>(num_threads_) * kChunksPerThread);
    run_chunks(chunks, [&](std::int64_t c, int) {
      const std::int64_t begin = units * c / chunks * grain;
      const std::int64_t end = std::min(n, units * (c + 1) / chunks * grain);
      if (begin < end) fn(begin, end);
    });
  }

  // Chunks per thread parallel_for aims for: enough to even out load.
  static constexpr int kChunksPerThread = 4;

 private:
  using JobFn = void (*)(void*, std::int64_t, int);
  void dispatch(JobFn fn, void* ctx, std::int64_t num_chunks);
  // Claims and runs chunks of the job of `generation` until none is left.
  void work(std::uint32_t generation, int thread);
  void worker(int thread);

  int num_threads_;
  std::vector<std::thread> threads_;
  JobFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  std::atomic<std::int64_t> job_chunks_{0};
  // (generation << 32) | next chunk: a claim is valid only for its own job.
  // The chunk part while a job is being written: above any chunk count.
  static constexpr std::uint64_t kNoChunk = 0xFFFFFFFFu;
  std::atomic<std::uint64_t> claim_{0};
  std::atomic<std::int64_t> done_{0};
  std::atomic<std::uint32_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace folio
