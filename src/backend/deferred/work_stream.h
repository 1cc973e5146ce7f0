// WorkStream: calls queued in order and run later, on a worker thread of its
// own, as a GPU runs a stream. Nothing runs until the host asks to wait for a
// point of the queue (run_until), or kMaxQueued calls wait (a GPU's full
// launch queue blocks the host too): then the worker runs every call up to
// that point, in order, while the host waits. The host and the worker never run at once,
// so what the calls touch needs no locks. The first error a call throws is
// kept (the calls after it are skipped) until take_error() rethrows it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "backend/backend.h"

namespace folio {

class WorkStream {
 public:
  static constexpr std::size_t kMaxQueued = 1 << 16;

  WorkStream();
  ~WorkStream();  // runs what is queued, then ends the worker
  WorkStream(const WorkStream&) = delete;
  WorkStream& operator=(const WorkStream&) = delete;

  // Queues a call; returns its point: the queue's place once it has run.
  QueuePoint push(std::function<void()> call);
  // The point of the last call queued (0 before the first).
  QueuePoint last() const;
  // Runs every call queued up to `point` on the worker; returns when they
  // have run (at once when they already have).
  void run_until(QueuePoint point);
  // Rethrows the first error a call threw since the last take_error, if any.
  void take_error();

 private:
  void work();

  mutable std::mutex mutex_;
  std::condition_variable wake_;  // the worker: more may run, or stop
  std::condition_variable done_;  // the host: calls have run
  std::deque<std::function<void()>> queue_;
  QueuePoint pushed_ = 0;  // calls queued so far
  QueuePoint allowed_ = 0;  // the worker may run calls up to this point
  QueuePoint ran_ = 0;      // calls run (or skipped after an error) so far
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace folio
