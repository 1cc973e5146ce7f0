// SentencePieceEncoder: SentencePiece-style BPE as llama.cpp runs it for
// tokenizer.ggml.model "llama". The text (spaces already U+2581) starts as one
// symbol per UTF-8 character; the adjacent pair whose joined text is the token
// with the highest score merges (equal scores: the leftmost first), until no
// joined pair is a token. A final symbol that is no token falls back to its
// bytes' <0xXX> tokens. Invariant: symbols tile the text and stay contiguous.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace folio {

class SentencePieceEncoder {
 public:
  struct Scratch {
    struct Symbol {
      std::uint32_t begin;
      std::uint32_t length;  // 0 once merged into its left neighbour
      std::int32_t prev;
      std::int32_t next;
    };
    struct Candidate {
      float score;
      std::int32_t left;
      std::int32_t right;
      std::uint32_t length;  // of the joined text, to spot stale candidates
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };

  explicit SentencePieceEncoder(const Vocab& vocab);

  void encode(std::string_view text, std::vector<TokenId>& out, Scratch& scratch) const;

  // The token for a raw byte: <0xXX>, else the one-byte token, else the
  // unknown token, else -1 (the byte is dropped).
  TokenId byte_token(std::uint8_t byte) const { return byte_tokens_[byte]; }

 private:
  void push_candidate(std::string_view text, std::int32_t left, Scratch& scratch) const;

  const Vocab& vocab_;
  std::array<TokenId, 256> byte_tokens_;
};

}  // namespace folio
