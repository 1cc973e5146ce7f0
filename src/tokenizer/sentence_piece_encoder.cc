#include "tokenizer/sentence_piece_encoder.h"

#include <algorithm>

#include "core/error.h"
#include "core/utf8.h"

namespace folio {
namespace {

// Heap order: the highest score on top, then the leftmost.
bool lower_priority(const SentencePieceEncoder::Scratch::Candidate& a,
                    const SentencePieceEncoder::Scratch::Candidate& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

SentencePieceEncoder::SentencePieceEncoder(const Vocab& vocab) : vocab_(vocab) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int byte = 0; byte < 256; ++byte) {
    const char name[] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
    TokenId id = vocab.find(std::string_view(name, sizeof(name)));
    if (id < 0) id = vocab.find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
    if (id < 0) id = vocab.unk_id;
    byte_tokens_[byte] = id;
  }
}

void SentencePieceEncoder::push_candidate(std::string_view text, std::int32_t left, Scratch& scratch) const {
  if (left < 0) return;
  const auto& l = scratch.symbols[left];
  if (l.next < 0) return;
  const auto& r = scratch.symbols[l.next];
  const std::uint32_t length = l.length + r.length;
  const TokenId id = vocab_.find(text.substr(l.begin, length));
  if (id < 0) return;
  scratch.heap.push_back({vocab_.scores[id], left, l.next, length});
  std::push_heap(scratch.heap.begin(), scratch.heap.end(), lower_priority);
}

void SentencePieceEncoder::encode(std::string_view text, std::vector<TokenId>& out, Scratch& scratch) const {
  if (text.empty()) return;
  FOLIO_CHECK(text.size() < (std::size_t{1} << 31));
  auto& symbols = scratch.symbols;
  symbols.clear();
  for (std::uint32_t pos = 0; pos < text.size();) {
    // The lead byte alone fixes a character's length, as in llama.cpp.
    const auto length = static_cast<std::uint32_t>(
        std::min(utf8::length_from_lead(static_cast<unsigned char>(text[pos])), text.size() - pos));
    const auto index = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({pos, length, index - 1, pos + length < text.size() ? index + 1 : -1});
    pos += length;
  }
  scratch.heap.clear();
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(symbols.size()); ++i) push_candidate(text, i, scratch);

  while (!scratch.heap.empty()) {
    std::pop_heap(scratch.heap.begin(), scratch.heap.end(), lower_priority);
    const Scratch::Candidate c = scratch.heap.back();
    scratch.heap.pop_back();
    auto& left = symbols[c.left];
    auto& right = symbols[c.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != c.length) continue;  // stale
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    push_candidate(text, left.prev, scratch);
    push_candidate(text, c.left, scratch);
  }

  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].length);
    const TokenId id = vocab_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const TokenId byte = byte_tokens_[static_cast<std::uint8_t>(c)];
      if (byte >= 0) out.push_back(byte);
    }
  }
}

}  // namespace folio
