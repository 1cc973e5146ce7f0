// KvEventSink: where the engine hands the prefix cache's KV events after each
// step (server/kv_event_publisher.h sends them over ZeroMQ). publish() runs
// on the engine thread, so it must never block: queue or drop, not wait.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_event.h"

namespace folio {

struct KvEventSinkStats {
  std::int64_t num_batches = 0;          // batches handed to the sink
  std::int64_t num_events = 0;           // events in them
  std::int64_t num_dropped_batches = 0;  // refused because the queue was full
};

class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void publish(std::vector<KvEvent> events) = 0;
  virtual KvEventSinkStats stats() const = 0;
};

}  // namespace folio
