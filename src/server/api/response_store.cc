#include "server/api/response_store.h"

namespace folio::server {
namespace {

// Ids of evicted responses remembered per response the store holds: an id is
// about 30 bytes, so this costs little beside the responses themselves.
constexpr std::size_t kEvictedPerResponse = 16;

}  // namespace

ResponseStore::ResponseStore(std::size_t max_responses, std::size_t max_bytes)
    : max_responses_(max_responses), max_bytes_(max_bytes) {}

std::size_t ResponseStore::bytes_of(const StoredResponse& stored) {
  std::size_t n = dump_json(stored.response).size();
  for (const ChatMessage& m : stored.conversation) n += m.role.size() + m.content.size() + m.fields.dump().size();
  return n;
}

bool ResponseStore::put(const std::string& id, StoredResponse stored) {
  const std::size_t bytes = bytes_of(stored);
  std::lock_guard lock(mutex_);
  if (max_responses_ == 0 || bytes > max_bytes_) {
    remember_evicted(id);
    return false;
  }
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    bytes_ -= it->second.bytes;
    by_id_.erase(it);
  }
  while (!order_.empty() && (by_id_.size() + 1 > max_responses_ || bytes_ + bytes > max_bytes_)) {
    const std::string oldest = std::move(order_.front());
    order_.pop_front();
    auto it = by_id_.find(oldest);
    if (it == by_id_.end()) continue;  // erased before
    bytes_ -= it->second.bytes;
    by_id_.erase(it);
    remember_evicted(oldest);
  }
  by_id_[id] = Entry{std::make_shared<const StoredResponse>(std::move(stored)), bytes};
  bytes_ += bytes;
  order_.push_back(id);
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::find(const std::string& id, Lookup* why) const {
  std::lock_guard lock(mutex_);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    if (why) *why = Lookup::kFound;
    return it->second.stored;
  }
  if (why) *why = evicted_.contains(id) ? Lookup::kEvicted : Lookup::kUnknown;
  return nullptr;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  bytes_ -= it->second.bytes;
  by_id_.erase(it);
  // Its place in order_ stays until met; a store that only ever erases must
  // still not grow it without bound.
  if (order_.size() > 2 * by_id_.size() + 64)
    std::erase_if(order_, [this](const std::string& k) { return !by_id_.contains(k); });
  return true;
}

std::size_t ResponseStore::num_responses() const {
  std::lock_guard lock(mutex_);
  return by_id_.size();
}

std::size_t ResponseStore::num_bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

void ResponseStore::remember_evicted(const std::string& id) {
  if (!evicted_.insert(id).second) return;
  evicted_order_.push_back(id);
  const std::size_t cap = kEvictedPerResponse * std::max<std::size_t>(max_responses_, 1);
  while (evicted_order_.size() > cap) {
    evicted_.erase(evicted_order_.front());
    evicted_order_.pop_front();
  }
}

}  // namespace folio::server
