// ResponseStore: the Responses API's stored responses (store: true), in
// memory, bounded by a count and a byte total: the oldest go first. Evicted
// ids are remembered (a bounded number of them) so that a request naming one
// is told it was evicted rather than that it never existed. Thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "server/api/chat_prompt.h"
#include "server/api/json_fields.h"

namespace folio::server {

struct StoredResponse {
  Json response;  // the response object, as GET /v1/responses/{id} returns it
  // The conversation so far without instructions (they do not carry over):
  // every input, the previous responses' included, and this answer's turn.
  std::vector<ChatMessage> conversation;
};

class ResponseStore {
 public:
  enum class Lookup { kFound, kEvicted, kUnknown };

  ResponseStore(std::size_t max_responses, std::size_t max_bytes);

  // Evicts the oldest until both bounds hold; a response larger than
  // max_bytes alone is not kept (false).
  bool put(const std::string& id, StoredResponse stored);
  // The response `id`, or why there is none.
  std::shared_ptr<const StoredResponse> find(const std::string& id, Lookup* why = nullptr) const;
  // DELETE /v1/responses/{id}: true when it was stored.
  bool erase(const std::string& id);

  std::size_t max_responses() const { return max_responses_; }
  std::size_t num_responses() const;
  std::size_t num_bytes() const;

  // A stored response's size as the bounds count it: its JSON and the text of its conversation.
  static std::size_t bytes_of(const StoredResponse& stored);

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> stored;
    std::size_t bytes = 0;
  };
  void remember_evicted(const std::string& id);

  const std::size_t max_responses_;
  const std::size_t max_bytes_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> by_id_;
  std::deque<std::string> order_;  // ids oldest first (erased ones are skipped when met)
  std::size_t bytes_ = 0;
  std::set<std::string> evicted_;
  std::deque<std::string> evicted_order_;
};

}  // namespace folio::server
