// BytePairEncoder: byte-level BPE over a GPT-2 style vocab. A word's bytes start
// as the tokens of their byte-level characters; then the adjacent pair with the
// lowest merge rank merges, again and again (equal ranks: the leftmost first),
// until no listed merge applies. Invariant: every merge in the table joins two
// tokens of the vocab into a third, so every symbol is a token (or a byte that
// has none, which llama.cpp drops and so does this).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/byte_level_map.h"
#include "tokenizer/vocab.h"

namespace folio {

class BytePairEncoder {
 public:
  // Per-call buffers; keeping one across calls saves allocations.
  struct Scratch {
    struct Symbol {
      TokenId id;  // -2 once merged into its left neighbour
      std::int32_t prev;
      std::int32_t next;
    };
    struct Candidate {
      std::int32_t rank;
      std::int32_t left;
      TokenId left_id;
      TokenId right_id;
      TokenId result;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
    std::string text;
  };

  // Parses the merges; throws Error when one is malformed or names a text
  // that is not a token.
  explicit BytePairEncoder(const Vocab& vocab);

  // Appends the tokens of one word (raw bytes, as the pre-tokenizer cut them).
  void encode_word(std::string_view word, std::vector<TokenId>& out, Scratch& scratch) const;

  const ByteLevelMap& byte_map() const { return byte_map_; }
  std::size_t num_merges() const { return num_merges_; }

 private:
  // The merge table: open addressing on (left id, right id), at most half full.
  struct Merge {
    std::uint64_t key = kEmpty;
    std::int32_t rank = -1;
    TokenId result = -1;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  static std::uint64_t key(TokenId left, TokenId right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  static std::size_t slot_of(std::uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 20; }
  const Merge* find_merge(TokenId left, TokenId right) const;
  void push_candidate(std::int32_t left, Scratch& scratch) const;

  const Vocab& vocab_;
  ByteLevelMap byte_map_;
  std::array<TokenId, 256> byte_tokens_;  // token of each byte's character, or -1
  std::vector<Merge> merges_;
  std::size_t mask_ = 0;
  std::size_t num_merges_ = 0;
};

}  // namespace folio
