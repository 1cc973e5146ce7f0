// Vocab: a model's token table as its GGUF metadata describes it (texts, types,
// scores, merges, special ids and flags), plus what llama.cpp derives from it
// (token attributes, end-of-generation ids, pre-tokenizer flags). Invariant once
// finish() has run: every per-token vector has size() entries, token texts are
// unique and token_index maps each text to its id.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/ids.h"
#include "tokenizer/token_index.h"

namespace folio {

class GgufFile;

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

// Token attributes: bit flags with llama.cpp's values (llama_token_attr), so
// that they compare directly with the reference.
using TokenAttrs = std::uint32_t;
inline constexpr TokenAttrs kAttrUndefined = 0;
inline constexpr TokenAttrs kAttrUnknown = 1u << 0;
inline constexpr TokenAttrs kAttrUnused = 1u << 1;
inline constexpr TokenAttrs kAttrNormal = 1u << 2;
inline constexpr TokenAttrs kAttrControl = 1u << 3;
inline constexpr TokenAttrs kAttrUserDefined = 1u << 4;
inline constexpr TokenAttrs kAttrByte = 1u << 5;

enum class VocabKind {
  kBytePairGpt2,        // tokenizer.ggml.model = "gpt2": byte-level BPE with merges
  kSentencePieceBpe,    // "llama": SentencePiece-style BPE by scores, byte fallback
};

// The regex families of tokenizer.ggml.pre that folio implements; each names
// the llama.cpp pre-tokenizer whose regex list it uses.
enum class PreTokenizerKind {
  kDefault,  // "default"
  kGpt2,     // "gpt-2", "phi-2", "mpt", "olmo", ...
  kLlama3,   // "llama-bpe", "llama3", "dbrx", ...
  kSmolLM,   // "smollm", "starcoder", "refact", ... (single digits, then GPT-2)
  kQwen2,    // "qwen2", "stablelm2", "deepseek-r1-qwen", ...
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
  TokenId eot_id = -1;   // end of turn; found by its text when the key is absent
  TokenId eom_id = -1;   // end of message
  TokenId unk_id = -1;
  TokenId pad_id = -1;
  TokenId fim_pre_id = -1;
  TokenId fim_suf_id = -1;
  TokenId fim_mid_id = -1;
  TokenId fim_pad_id = -1;
  TokenId fim_rep_id = -1;
  TokenId fim_sep_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  // Hugging Face tokenizer.json: the pre-tokenizer's regexes in the order they
  // apply (empty: those of the `pre` family), and NFC normalization of the
  // text before it is split. With regexes, finish() keeps the flags below as
  // the file set them.
  std::vector<std::string> pre_regexes;
  bool normalize_nfc = false;
  // Tokens that look like end-of-turn or fill-in-the-middle markers become
  // control tokens, as llama.cpp makes them. A tokenizer.json says which
  // tokens are special itself: there, only its special tokens are looked at.
  bool promote_markers = true;

  // Derived by finish().
  PreTokenizerKind pre_kind = PreTokenizerKind::kDefault;
  bool ignore_merges = false;  // a pre-token that is a whole token skips the merges
  bool clean_spaces = false;   // decoding removes spaces before punctuation (HF clean_up_tokenization_spaces)
  std::vector<TokenAttrs> attrs;  // [vocab_size]
  TokenIndex token_index;         // text -> id
  // End-of-generation tokens: eos, eot, eom and the other tokens that end a turn.
  std::vector<TokenId> end_of_generation_ids;
  // Marker ids (eot, fim, ...) found by their text rather than named by the
  // file, so that calling finish() again finds them again.
  std::vector<TokenId> detected_markers;

  std::int64_t size() const { return static_cast<std::int64_t>(tokens.size()); }
  bool contains(TokenId id) const { return id >= 0 && id < size(); }
  bool is_control(TokenId id) const;
  bool is_end_of_generation(TokenId id) const;
  // The id of a token text, or -1.
  TokenId find(std::string_view text) const { return token_index.find(text, tokens); }

  // Reads the tokenizer.* keys of a GGUF file and calls finish().
  static Vocab from_gguf(const GgufFile& file);
  // Reads a Hugging Face directory's tokenizer.json (byte-level BPE) and
  // tokenizer_config.json, and calls finish(). Ids up to min_size - 1 that the
  // file leaves out (a model's padded embedding rows) become unused tokens.
  static Vocab from_hf(const std::string& dir, std::int64_t min_size = 0);

  // Checks the fields above and derives the rest the way llama.cpp does when it
  // loads a vocab: attributes from types, with tokens that look like end-of-turn
  // or fill-in-the-middle markers promoted to control tokens; the EOG set;
  // pre-tokenizer flags. Throws Error, saying what is wrong, on a vocab that
  // cannot be used. `source` names the vocab in errors.
  void finish(std::string_view source = "vocab");
};

}  // namespace folio
