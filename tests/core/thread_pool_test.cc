// ThreadPool: every chunk runs exactly once per job, jobs never overlap, and
// thread indices stay in range, over many jobs of many sizes.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace folio {
namespace {

TEST(ThreadPool, EveryChunkRunsOnceInEveryJob) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int job = 0; job < 2000; ++job) {
      const std::int64_t chunks = job % 37;
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(chunks));
      std::atomic<int> bad_thread{0};
      pool.run_chunks(chunks, [&](std::int64_t c, int t) {
        hits[static_cast<std::size_t>(c)].fetch_add(1);
        if (t < 0 || t >= threads) bad_thread.fetch_add(1);
      });
      for (std::int64_t c = 0; c < chunks; ++c) ASSERT_EQ(hits[c].load(), 1) << "threads " << threads << " job " << job;
      ASSERT_EQ(bad_thread.load(), 0);
    }
  }
}

// A worker still leaving the last job (it has seen every chunk claimed)
// must not claim a chunk of the next one while the caller is writing it:
// that ran a chunk twice, or with the old job's context, and left the
// caller waiting forever for a count it had passed. Jobs whose chunk count
// grows from one to the next open that window; many tiny ones hit it.
TEST(ThreadPool, AWorkerLeavingAJobNeverClaimsFromTheNext) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(64);
    for (int job = 0; job < 300000; ++job) {
      const std::int64_t chunks = job % 2 == 0 ? 2 : 64;
      for (std::int64_t c = 0; c < chunks; ++c) hits[static_cast<std::size_t>(c)].store(0, std::memory_order_relaxed);
      const int tag = job;
      std::atomic<int> wrong_job{0};
      pool.run_chunks(chunks, [&](std::int64_t c, int) {
        if (tag != job) wrong_job.fetch_add(1);
        hits[static_cast<std::size_t>(c)].fetch_add(1, std::memory_order_relaxed);
      });
      ASSERT_EQ(wrong_job.load(), 0) << "threads " << threads << " job " << job;
      for (std::int64_t c = 0; c < chunks; ++c)
        ASSERT_EQ(hits[static_cast<std::size_t>(c)].load(), 1) << "threads " << threads << " job " << job << " chunk " << c;
    }
  }
}

TEST(ThreadPool, ParallelForCoversTheRangeExactlyOnce) {
  ThreadPool pool(2);
  for (std::int64_t n : {0, 1, 2, 7, 100, 1001}) {
    for (std::int64_t grain : {1, 3, 64}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
        EXPECT_LT(begin, end);
        for (std::int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
      }, grain);
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " grain " << grain;
    }
  }
}

TEST(ThreadPool, WorkersThatSleptWakeForTheNextJob) {
  ThreadPool pool(2);
  std::atomic<int> sum{0};
  pool.run_chunks(4, [&](std::int64_t c, int) { sum += static_cast<int>(c); });
  // Longer than the workers' spin: they sleep, and must wake for this job.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pool.run_chunks(4, [&](std::int64_t c, int) { sum += static_cast<int>(c); });
  EXPECT_EQ(sum.load(), 12);
}

}  // namespace
}  // namespace folio
