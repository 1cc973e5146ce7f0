// PreTokenizer: splits text into the words that byte-level BPE encodes one at
// a time, with the regex list llama.cpp applies for a tokenizer.ggml.pre family
// (each regex splits the pieces the previous one left; text between matches is
// a piece too). Invariant: the pieces are non-empty, in order, and tile the text.
//
// The regexes run in PCRE2 (UTF + UCP, JIT). Where PCRE2's Unicode tables (14.0
// in PCRE2 10.42) class a code point differently from llama.cpp's (15.1), the
// code point is matched as a stand-in of llama.cpp's class with the same UTF-8
// length, so the split is the one llama.cpp makes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace folio {

class PreTokenizer {
 public:
  // A piece of the text: bytes [begin, end).
  struct Piece {
    std::uint32_t begin;
    std::uint32_t end;
  };

  // Per-call buffers; keeping one across calls saves allocations.
  class Scratch {
   public:
    Scratch();
    ~Scratch();
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

   private:
    friend class PreTokenizer;
    void* match_data_ = nullptr;  // pcre2_match_data_8*
    std::string match_text_;
    std::vector<Piece> next_;
  };

  explicit PreTokenizer(PreTokenizerKind kind);
  // Regexes of one's own (a tokenizer.json's), applied in order.
  explicit PreTokenizer(const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // The regexes of a family, in the order they apply (llama.cpp's strings).
  static std::vector<std::string> regexes(PreTokenizerKind kind);

  // Splits `text` into `pieces` (cleared first). `text` is UTF-8 where every
  // sequence decodes, though surrogates (U+D800..DFFF) may appear, as they do
  // in the text llama.cpp's lenient decoding rebuilds.
  void split(std::string_view text, std::vector<Piece>& pieces, Scratch& scratch) const;
  std::vector<std::string> split(std::string_view text) const;  // for tests and tools

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace folio
