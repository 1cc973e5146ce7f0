#include "server/http/worker_pool.h"

namespace folio::server {

WorkerPool::WorkerPool(int max_threads) : max_threads_(max_threads > 0 ? max_threads : 1) {}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(job));
    // Idle threads outnumbering the queue will take it; otherwise one more.
    if (num_idle_ < static_cast<int>(queue_.size()) && static_cast<int>(threads_.size()) < max_threads_)
      threads_.emplace_back([this] { run(); });
  }
  wake_.notify_one();
}

int WorkerPool::num_threads() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(threads_.size());
}

void WorkerPool::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++num_idle_;
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    --num_idle_;
    if (queue_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // whatever it held goes before the next wait
    lock.lock();
  }
}

}  // namespace folio::server
