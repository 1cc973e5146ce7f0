#include "engine/token_counts.h"

#include "core/error.h"

namespace folio {

void TokenCounts::add(TokenId token) {
  auto [it, inserted] = index_.try_emplace(token, entries_.size());
  if (inserted) {
    entries_.push_back({token, 1});
  } else {
    ++entries_[it->second].count;
  }
  ++num_tokens_;
}

void TokenCounts::remove(TokenId token) {
  auto it = index_.find(token);
  if (it == index_.end()) {
    fail("TokenCounts::remove: token {} is not counted; remove only tokens that were added", token);
  }
  const std::size_t place = it->second;
  --num_tokens_;
  if (--entries_[place].count > 0) return;
  // Swap-remove keeps entries_ dense; the moved entry's index follows it.
  index_.erase(it);
  if (place + 1 != entries_.size()) {
    entries_[place] = entries_.back();
    index_[entries_[place].token] = place;
  }
  entries_.pop_back();
}

void TokenCounts::clear() {
  entries_.clear();
  index_.clear();
  num_tokens_ = 0;
}

std::int32_t TokenCounts::count(TokenId token) const {
  auto it = index_.find(token);
  return it == index_.end() ? 0 : entries_[it->second].count;
}

}  // namespace folio
