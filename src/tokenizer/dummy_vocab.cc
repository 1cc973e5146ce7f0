#include "tokenizer/dummy_vocab.h"

#include <string>

#include "core/error.h"
#include "tokenizer/byte_level_map.h"

namespace folio {

Vocab dummy_vocab(std::int64_t size) {
  if (size < 1024) fail("a dummy vocab needs at least 1,024 tokens, not {}", size);
  const ByteLevelMap bytes;
  Vocab v;
  v.model = "gpt2";
  v.kind = VocabKind::kBytePairGpt2;
  v.pre = "default";
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(bytes.encode(static_cast<std::uint8_t>(b)));
  // Merges of a space and a letter, then of two letters: English text comes
  // to about two characters a token, so prompts written for a real model
  // still fit their tests' contexts.
  const std::string space(bytes.encode(' '));
  for (char a = 'a'; a <= 'z'; ++a) {
    v.tokens.push_back(space + a);
    v.merges.push_back(space + " " + a);
  }
  for (char a = 'a'; a <= 'z'; ++a)
    for (char b = 'a'; b <= 'z'; ++b) {
      v.tokens.push_back(std::string{a, b});
      v.merges.push_back(std::string{a, ' ', b});
    }
  v.types.assign(v.tokens.size(), TokenType::kNormal);
  v.eos_id = static_cast<TokenId>(v.tokens.size());
  v.tokens.emplace_back("<|endoftext|>");
  v.types.push_back(TokenType::kControl);
  while (static_cast<std::int64_t>(v.tokens.size()) < size) {
    v.tokens.push_back("<|dummy_" + std::to_string(v.tokens.size()) + "|>");
    v.types.push_back(TokenType::kUnused);
  }
  v.bos_id = v.eos_id;
  v.finish("dummy vocab");
  return v;
}

}  // namespace folio
