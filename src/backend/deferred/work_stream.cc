#include "backend/deferred/work_stream.h"

#include <utility>

namespace folio {

WorkStream::WorkStream() : worker_([this] { work(); }) {}

WorkStream::~WorkStream() {
  run_until(last());
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

QueuePoint WorkStream::push(std::function<void()> call) {
  QueuePoint point;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(call));
    point = ++pushed_;
    if (queue_.size() < kMaxQueued) return point;
  }
  run_until(point);
  return point;
}

QueuePoint WorkStream::last() const {
  std::lock_guard lock(mutex_);
  return pushed_;
}

void WorkStream::run_until(QueuePoint point) {
  std::unique_lock lock(mutex_);
  if (point > pushed_) point = pushed_;
  if (ran_ >= point) return;
  if (point > allowed_) allowed_ = point;
  wake_.notify_all();
  done_.wait(lock, [&] { return ran_ >= point; });
}

void WorkStream::take_error() {
  std::exception_ptr e;
  {
    std::lock_guard lock(mutex_);
    std::swap(e, error_);
  }
  if (e) std::rethrow_exception(e);
}

void WorkStream::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || ran_ < allowed_; });
    if (ran_ >= allowed_) return;  // stopping, nothing left that may run
    std::function<void()> call = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = error_ != nullptr;
    lock.unlock();
    if (!skip) {
      try {
        call();
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        lock.unlock();
      }
    }
    call = nullptr;
    lock.lock();
    ++ran_;
    if (ran_ >= allowed_) done_.notify_all();
  }
}

}  // namespace folio
