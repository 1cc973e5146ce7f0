// Small vocabs built by hand, for tokenizer unit tests that need exact control
// over tokens, merges and scores.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level_map.h"
#include "tokenizer/vocab.h"

namespace folio::testing {

// A byte-level (gpt2) vocab: one token per byte (ids 0..255, in byte order),
// then one token per merge result in merge order, then `extra` tokens. Merges
// are written in byte-level spelling ("Ġ t" joins " " and "t").
inline Vocab byte_level_vocab(const std::vector<std::string>& merges,
                              const std::vector<std::pair<std::string, TokenType>>& extra = {},
                              const std::string& pre = "gpt-2") {
  Vocab v;
  v.kind = VocabKind::kBytePairGpt2;
  v.model = "gpt2";
  v.pre = pre;
  ByteLevelMap map;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(map.encode(static_cast<std::uint8_t>(b)));
  for (const std::string& m : merges) {
    const std::size_t space = m.find(' ', 1);
    std::string joined = m.substr(0, space) + m.substr(space + 1);
    bool known = false;
    for (const std::string& t : v.tokens) known |= t == joined;
    if (!known) v.tokens.push_back(joined);
  }
  v.types.assign(v.tokens.size(), TokenType::kNormal);
  for (const auto& [text, type] : extra) {
    v.tokens.push_back(text);
    v.types.push_back(type);
  }
  v.merges = merges;
  return v;
}

// The byte-level spelling of raw text ("a b" -> "aĠb").
inline std::string byte_level(std::string_view raw) {
  ByteLevelMap map;
  std::string out;
  for (char c : raw) out += map.encode(static_cast<std::uint8_t>(c));
  return out;
}

// A SentencePiece (llama) vocab: <unk>, <s>, </s>, the 256 <0xXX> byte tokens
// (ids 3..258), then `pieces` with their scores, then `extra` tokens (score 0).
inline Vocab sentence_piece_vocab(const std::vector<std::pair<std::string, float>>& pieces,
                                  const std::vector<std::pair<std::string, TokenType>>& extra = {}) {
  Vocab v;
  v.kind = VocabKind::kSentencePieceBpe;
  v.model = "llama";
  v.pre = "default";
  auto add = [&](std::string text, TokenType type, float score) {
    v.tokens.push_back(std::move(text));
    v.types.push_back(type);
    v.scores.push_back(score);
  };
  add("<unk>", TokenType::kUnknown, 0);
  add("<s>", TokenType::kControl, 0);
  add("</s>", TokenType::kControl, 0);
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", TokenType::kByte, 0);
  for (const auto& [text, score] : pieces) add(text, TokenType::kNormal, score);
  for (const auto& [text, type] : extra) add(text, type, 0);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

}  // namespace folio::testing
