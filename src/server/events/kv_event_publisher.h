// KvEventPublisher: sends the engine's KV-cache events on a ZeroMQ PUB socket
// in vLLM's format (server/kv_event_encoding.h), each batch as the multipart
// message [topic, sequence number (8 bytes, big-endian), msgpack payload], so
// a prefix-aware router (llm-d's precise prefix scorer) can follow which
// blocks this replica holds. The engine thread only queues: a full queue
// drops the batch, and the gap it leaves in the sequence numbers tells a
// subscriber it missed something. One thread of its own encodes and sends.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/kv_event_sink.h"

namespace folio::server {

struct KvEventPublisherOptions {
  // vLLM's rule: an endpoint with "*", "::", ipc:// or inproc:// is bound,
  // any other (tcp://router:5557) is connected to.
  std::string endpoint = "tcp://*:5557";
  std::string topic;                  // the first frame of every message
  std::size_t max_queued_batches = 10'000;
  int send_high_water_mark = 100'000;  // ZeroMQ's per-subscriber queue, in messages
};

class KvEventPublisher final : public KvEventSink {
 public:
  // Binds or connects at once and sends AllBlocksCleared first, so that a
  // subscriber forgets what an earlier process on this endpoint held.
  // Throws Error when the endpoint is malformed or cannot be bound.
  explicit KvEventPublisher(KvEventPublisherOptions options);
  // Sends AllBlocksCleared (the blocks die with the process), then what is
  // still queued, for up to a second.
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void publish(std::vector<KvEvent> events) override;
  KvEventSinkStats stats() const override;
  const std::string& endpoint() const { return options_.endpoint; }

 private:
  struct Batch {
    std::uint64_t seq;
    double ts_s;
    std::vector<KvEvent> events;
  };
  struct Socket;  // the ZeroMQ context and socket, kept out of this header

  void enqueue(std::vector<KvEvent> events, bool even_if_full);
  void run();

  KvEventPublisherOptions options_;
  std::unique_ptr<Socket> socket_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Batch> queue_;
  std::uint64_t next_seq_ = 0;
  bool stop_ = false;
  KvEventSinkStats stats_;
  std::thread thread_;
};

}  // namespace folio::server
