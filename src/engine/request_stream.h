// RequestStream: the queue between the engine thread, which pushes outputs,
// and the consumer of one request, which takes them (blocking, with a
// timeout). Outputs taken together are merged, so a slow consumer never makes
// the queue grow without bound in number of entries.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

#include "engine/request_output.h"

namespace folio {

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

 private:
  std::uint64_t id_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::optional<RequestOutput> pending_;
  bool ended_ = false;   // the final output was pushed
  bool drained_ = false; // ... and taken
};

}  // namespace folio
