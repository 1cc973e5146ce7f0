// SpecialTokenPartition: cuts text into raw runs and special tokens before any
// BPE runs, as llama.cpp's tokenizer_st_partition does. Control and unknown
// tokens are found only when parse_special is set; user-defined tokens always.
// Longer tokens claim text first (equal lengths: lower id first); each token
// takes its leftmost non-overlapping occurrences in what is still raw.
// Literal ranges (user text inside a rendered chat) read no control token even
// with parse_special: an occurrence that overlaps one stays raw text.
// Invariant: the fragments are in order and tile the text.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tokenizer/text_range.h"
#include "tokenizer/vocab.h"

namespace folio {

class SpecialTokenPartition {
 public:
  struct Fragment {
    TokenId token;        // -1 for raw text
    std::uint32_t begin;  // bytes [begin, end) of the text
    std::uint32_t end;
  };

  explicit SpecialTokenPartition(const Vocab& vocab);

  // literal: sorted, non-overlapping byte ranges [begin, end) of `text`.
  void split(std::string_view text, bool parse_special, std::vector<Fragment>& fragments,
             std::span<const TextRange> literal = {}) const;

  // The tokens that take part, in the order they claim text.
  const std::vector<TokenId>& tokens() const { return tokens_; }

 private:
  // A trie over the special tokens' texts, to find which of them occur.
  struct Node {
    std::vector<std::pair<unsigned char, std::int32_t>> children;  // sorted by byte
    std::int32_t rank = -1;  // index into tokens_ of the token ending here
  };
  std::int32_t child(std::int32_t node, unsigned char byte) const;

  const Vocab& vocab_;
  std::vector<TokenId> tokens_;
  std::vector<bool> always_;  // [tokens_.size()] user-defined: found even without parse_special
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
};

}  // namespace folio
