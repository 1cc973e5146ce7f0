// Tokenizer: text <-> token ids for a GGUF vocab, giving exactly the ids
// llama.cpp gives (llama_tokenize) and the text it gives back (llama_detokenize,
// llama_token_to_piece). Special tokens are cut out first; the raw runs between
// them go through byte-level BPE (gpt2) or SentencePiece-style BPE (llama).
// Immutable after create(): safe to share between threads.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/text_range.h"
#include "tokenizer/vocab.h"

namespace folio {

class BytePairEncoder;
class PreTokenizer;
class SentencePieceEncoder;
class SpecialTokenPartition;
struct EncodeState;

class Tokenizer {
 public:
  // Builds the tokenizer; throws Error when the vocab cannot be used (a merge
  // that names no token, an unknown pre-tokenizer, ...).
  static std::unique_ptr<Tokenizer> create(Vocab vocab);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: BOS/EOS as the vocab's add_bos/add_eos say. parse_special:
  // control tokens written in the text ("<|im_start|>") become those tokens;
  // user-defined tokens always do. Bytes that are not UTF-8 are read as U+FFFD
  // (byte-level BPE) or fall back to byte tokens (SentencePiece), as in llama.cpp.
  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const;
  // The same, but no control token is read where it would overlap one of the
  // `literal` byte ranges (sorted, disjoint): a chat's user text, which must
  // stay text inside the template's own special tokens.
  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special,
                              std::span<const TextRange> literal) const;

  // The bytes of one token; control and unknown tokens are empty unless
  // render_special. Throws Error for an id outside the vocab.
  std::string token_to_piece(TokenId id, bool render_special) const;

  // The pieces joined, less the first token's leading space when the vocab adds
  // one (add_space_prefix), cleaned up for clean_spaces vocabs. The bytes may
  // end inside a UTF-8 character; IncrementalDecoder streams safely.
  std::string decode(std::span<const TokenId> ids, bool render_special) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  explicit Tokenizer(Vocab vocab);
  void encode_byte_level(std::string_view text, std::vector<TokenId>& out, EncodeState& state) const;

  Vocab vocab_;
  std::unique_ptr<SpecialTokenPartition> partition_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;        // byte-level BPE only
  std::unique_ptr<BytePairEncoder> byte_pair_;         // byte-level BPE only
  std::unique_ptr<SentencePieceEncoder> sentence_piece_;  // SentencePiece only
};

}  // namespace folio
