// RequestStream: the queue between the engine thread, which pushes outputs,
// and the consumer of one request, which takes them (blocking, with a
// timeout). Outputs taken together are merged, so a slow consumer never makes
// the queue grow without bound in number of entries. An OutputSignal lets one
// consumer wait on several streams at once (a request of several prompts).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/request_output.h"

namespace folio {

// Counts pushes to the streams it is attached to, so that their consumer can
// sleep until one of them has something: read generation(), look at every
// stream, and if none had output, wait_past() what was read.
class OutputSignal {
 public:
  std::uint64_t generation() const;
  void wait_past(std::uint64_t seen);
  void notify();

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t generation_ = 0;
};

class RequestStream {
 public:
  explicit RequestStream(std::uint64_t id) : id_(id) {}
  std::uint64_t id() const { return id_; }

  // Engine side.
  void push(RequestOutput output);

  // Consumer side: everything pushed since the last call, merged; waits up to
  // `timeout` when nothing is there. nullopt on timeout, or when the stream
  // has ended and everything was taken.
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  bool finished() const;
  // Every later push also notifies `signal`.
  void attach(std::shared_ptr<OutputSignal> signal);

 private:
  std::uint64_t id_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::optional<RequestOutput> pending_;
  bool ended_ = false;   // the final output was pushed
  bool drained_ = false; // ... and taken
  std::shared_ptr<OutputSignal> signal_;
};

}  // namespace folio
