// TokenCounts: how many times each token occurs in a sequence, kept sparse
// (one entry per distinct token, never a vocabulary-sized array), so that
// penalties cost O(distinct tokens) and the engine updates it per appended token.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace folio {

class TokenCounts {
 public:
  struct Entry {
    TokenId token;
    std::int32_t count;  // > 0
  };

  TokenCounts() = default;
  explicit TokenCounts(std::span<const TokenId> tokens) { add(tokens); }

  void add(TokenId token);
  void add(std::span<const TokenId> tokens) {
    for (TokenId token : tokens) add(token);
  }
  // Takes back one occurrence (speculative tokens that were rejected). The
  // token must be present.
  void remove(TokenId token);
  void clear();

  std::int32_t count(TokenId token) const;
  bool contains(TokenId token) const { return index_.count(token) != 0; }
  // One entry per distinct token, in no particular order.
  std::span<const Entry> entries() const { return entries_; }
  std::int64_t num_distinct() const { return static_cast<std::int64_t>(entries_.size()); }
  std::int64_t num_tokens() const { return num_tokens_; }

 private:
  std::vector<Entry> entries_;
  std::unordered_map<TokenId, std::size_t> index_;  // token -> its place in entries_
  std::int64_t num_tokens_ = 0;
};

}  // namespace folio
