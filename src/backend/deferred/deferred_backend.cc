#include "backend/deferred/deferred_backend.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/deferred/work_stream.h"

namespace folio {

// What outlives the backend as long as one of its buffers does: the stream
// their release waits for, and the host ranges allocate_host made.
struct DeferredBackend::State {
  WorkStream stream;
  std::mutex mutex;
  std::map<std::uintptr_t, std::uintptr_t> pinned;  // begin -> end of each allocate_host buffer

  bool is_pinned(const void* p, std::size_t bytes) {
    const auto begin = reinterpret_cast<std::uintptr_t>(p);
    std::lock_guard lock(mutex);
    auto it = pinned.upper_bound(begin);
    if (it == pinned.begin()) return false;
    --it;
    return begin >= it->first && begin + bytes <= it->second;
  }
};

DeferredBackend::DeferredBackend(std::unique_ptr<Backend> inner)
    : ForwardingBackend(std::move(inner)), state_(std::make_shared<State>()) {}

DeferredBackend::~DeferredBackend() { state_->stream.run_until(state_->stream.last()); }

Buffer DeferredBackend::released_after_queue(Buffer inner) {
  if (inner.empty()) return inner;
  auto real = std::make_shared<Buffer>(std::move(inner));
  void* data = real->data();
  const std::size_t size = real->size();
  const Device device = real->device();
  return Buffer(data, size, device, [real, state = state_]() mutable {
    state->stream.run_until(state->stream.last());
    real.reset();
  });
}

Buffer DeferredBackend::allocate(std::size_t bytes) { return released_after_queue(inner().allocate(bytes)); }

Buffer DeferredBackend::allocate_host(std::size_t bytes) {
  auto real = std::make_shared<Buffer>(inner().allocate_host(bytes));
  if (real->empty()) return std::move(*real);
  const auto begin = reinterpret_cast<std::uintptr_t>(real->data());
  {
    std::lock_guard lock(state_->mutex);
    state_->pinned[begin] = begin + real->size();
  }
  return Buffer(real->data(), real->size(), real->device(), [real, begin, state = state_]() mutable {
    state->stream.run_until(state->stream.last());
    {
      std::lock_guard lock(state->mutex);
      state->pinned.erase(begin);
    }
    real.reset();
  });
}

void DeferredBackend::copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) {
  if (state_->is_pinned(src, bytes)) {
    issue([this, dst, src, bytes] { inner().copy_to_device(dst, src, bytes); });
    return;
  }
  const auto* from = static_cast<const std::uint8_t*>(src);
  issue([this, dst, bytes, copy = std::vector<std::uint8_t>(from, from + bytes)] {
    inner().copy_to_device(dst, copy.data(), bytes);
  });
}

void DeferredBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
  issue([this, dst, src, bytes] { inner().copy_to_host(dst, src, bytes); });
  synchronize();
}

void DeferredBackend::synchronize() {
  state_->stream.run_until(state_->stream.last());
  state_->stream.take_error();
  inner().synchronize();
}

QueuePoint DeferredBackend::queue_point() { return state_->stream.last(); }

void DeferredBackend::wait_until(QueuePoint point) { state_->stream.run_until(point); }

Buffer DeferredBackend::load_weight(Tensor& w) {
  state_->stream.run_until(state_->stream.last());
  return released_after_queue(inner().load_weight(w));
}

void DeferredBackend::issue(std::function<void()> op) { state_->stream.push(std::move(op)); }

}  // namespace folio
