#include "core/thread_pool.h"

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace folio {
namespace {

// A worker polls for the next job this long before it sleeps: long enough to
// bridge the gap between the ops of one forward pass, short enough not to
// burn a core when the engine is idle.
constexpr auto kSpinTime = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::dispatch(JobFn fn, void* ctx, std::int64_t num_chunks) {
  const std::uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  // First close the previous job's claims: a worker may still be in work()
  // for it, holding a claim value of the old generation with every chunk
  // taken. Were the job written first, that worker could read the new chunk
  // count, find its old claim still in place and win it - running a chunk
  // of the new job twice and counting it twice (the caller then waited
  // forever), or with a context half written. With the new generation in
  // place first, its compare-exchange fails; job_chunks_ is released and
  // acquired so that a worker seeing the new count also sees this store.
  claim_.store((static_cast<std::uint64_t>(gen) << 32) | kNoChunk, std::memory_order_seq_cst);
  // Only the caller writes the job, and only between jobs: every chunk of
  // the previous one is done, so no worker can be running it.
  job_fn_ = fn;
  job_ctx_ = ctx;
  done_.store(0, std::memory_order_relaxed);
  job_chunks_.store(num_chunks, std::memory_order_release);
  claim_.store(static_cast<std::uint64_t>(gen) << 32, std::memory_order_release);
  // seq_cst on both sides (here and around the worker's sleep) so that either
  // the worker sees the new generation or this sees the sleeper.
  generation_.store(gen, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  work(gen, 0);
  while (done_.load(std::memory_order_acquire) != num_chunks) cpu_relax();
}

void ThreadPool::work(std::uint32_t gen, int thread) {
  std::uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<std::uint32_t>(c >> 32) != gen) return;  // a later job: not ours to claim
    const auto chunk = static_cast<std::int64_t>(c & 0xFFFFFFFFu);
    if (chunk >= job_chunks_.load(std::memory_order_acquire)) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    job_fn_(job_ctx_, chunk, thread);
    done_.fetch_add(1, std::memory_order_acq_rel);
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker(int thread) {
  std::uint32_t seen = 0;
  for (;;) {
    std::uint32_t gen = generation_.load(std::memory_order_acquire);
    if (gen == seen) {
      const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
      int polls = 0;
      while (gen == seen) {
        cpu_relax();
        gen = generation_.load(std::memory_order_acquire);
        if (++polls % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
      while (gen == seen) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        generation_.wait(seen, std::memory_order_seq_cst);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        gen = generation_.load(std::memory_order_acquire);
      }
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    work(gen, thread);
  }
}

}  // namespace folio
