// Vocab: a model's token table as its GGUF metadata describes it (texts,
// types, scores, merges, special ids and flags); tokenizers are built on it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace folio {

class GgufFile;

using TokenId = std::int32_t;

// Token types of tokenizer.ggml.token_type.
enum class TokenType : std::int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabKind {
  kBytePairGpt2,        // tokenizer.ggml.model = "gpt2": byte-level BPE with merges
  kSentencePieceBpe,    // "llama": SentencePiece-style BPE by scores, byte fallback
};

struct Vocab {
  VocabKind kind = VocabKind::kBytePairGpt2;
  std::string model;        // tokenizer.ggml.model
  std::string pre;          // tokenizer.ggml.pre ("default" when absent)
  std::vector<std::string> tokens;     // [vocab_size]
  std::vector<TokenType> types;        // [vocab_size]
  std::vector<float> scores;           // [vocab_size], empty when absent
  std::vector<std::string> merges;     // "a b" pairs in rank order (gpt2 only)

  TokenId bos_id = -1;
  TokenId eos_id = -1;
  TokenId eot_id = -1;
  TokenId unk_id = -1;
  TokenId pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;

  std::unordered_map<std::string, TokenId> token_to_id;

  std::int64_t size() const { return static_cast<std::int64_t>(tokens.size()); }
  bool is_control(TokenId id) const;
  // End-of-generation tokens: eos, eot and the other tokens that end a turn.
  bool is_end_of_generation(TokenId id) const;
  std::vector<TokenId> end_of_generation_ids;

  // Reads and validates the tokenizer.* keys of a GGUF file.
  static Vocab from_gguf(const GgufFile& file);
};

}  // namespace folio
