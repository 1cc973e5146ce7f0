#include "server/events/kv_event_publisher.h"

#include <zmq.hpp>

#include <chrono>

#include "core/error.h"
#include "server/events/kv_event_encoding.h"

namespace folio::server {
namespace {

bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct KvEventPublisher::Socket {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
};

KvEventPublisher::KvEventPublisher(KvEventPublisherOptions options)
    : options_(std::move(options)), socket_(std::make_unique<Socket>()) {
  try {
    socket_->pub.set(zmq::sockopt::sndhwm, options_.send_high_water_mark);
    // At exit the last batches (AllBlocksCleared) get this long to leave.
    socket_->pub.set(zmq::sockopt::linger, 1000);
    if (binds(options_.endpoint))
      socket_->pub.bind(options_.endpoint);
    else
      socket_->pub.connect(options_.endpoint);
  } catch (const zmq::error_t& e) {
    fail("--kv-events-endpoint {}: {} ({}); give tcp://*:PORT to listen, or tcp://HOST:PORT to connect to a "
         "subscriber that listens",
         options_.endpoint, e.what(), binds(options_.endpoint) ? "cannot bind it" : "cannot connect to it");
  }
  KvEvent cleared;
  cleared.kind = KvEvent::Kind::kAllCleared;
  enqueue({cleared}, /*even_if_full=*/true);
  thread_ = std::thread([this] { run(); });
}

KvEventPublisher::~KvEventPublisher() {
  KvEvent cleared;
  cleared.kind = KvEvent::Kind::kAllCleared;
  enqueue({cleared}, /*even_if_full=*/true);
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void KvEventPublisher::publish(std::vector<KvEvent> events) { enqueue(std::move(events), /*even_if_full=*/false); }

void KvEventPublisher::enqueue(std::vector<KvEvent> events, bool even_if_full) {
  {
    std::lock_guard lock(mutex_);
    const std::uint64_t seq = next_seq_++;  // a dropped batch leaves its number unused: a visible gap
    ++stats_.num_batches;
    stats_.num_events += static_cast<std::int64_t>(events.size());
    if (!even_if_full && queue_.size() >= options_.max_queued_batches) {
      ++stats_.num_dropped_batches;
      return;
    }
    queue_.push_back(Batch{seq, unix_seconds(), std::move(events)});
  }
  wake_.notify_one();
}

KvEventSinkStats KvEventPublisher::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void KvEventPublisher::run() {
  const auto deadline_after_stop = std::chrono::seconds(1);
  std::chrono::steady_clock::time_point stop_deadline{};
  for (;;) {
    Batch batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      if (stop_) {
        if (stop_deadline == std::chrono::steady_clock::time_point{})
          stop_deadline = std::chrono::steady_clock::now() + deadline_after_stop;
        else if (std::chrono::steady_clock::now() > stop_deadline)
          return;
      }
      batch = std::move(queue_.front());
      queue_.pop_front();
    }
    const std::string payload = encode_kv_event_batch(batch.ts_s, batch.events, /*data_parallel_rank=*/0);
    unsigned char seq[8];
    for (int i = 0; i < 8; ++i) seq[i] = static_cast<unsigned char>(batch.seq >> (8 * (7 - i)));
    try {
      // A PUB socket never blocks: past the high-water mark ZeroMQ drops.
      socket_->pub.send(zmq::buffer(options_.topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      socket_->pub.send(zmq::buffer(seq, sizeof seq), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      socket_->pub.send(zmq::buffer(payload), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      std::lock_guard lock(mutex_);
      ++stats_.num_dropped_batches;
    }
  }
}

}  // namespace folio::server
