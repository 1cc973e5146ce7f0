#include "tokenizer/byte_pair_encoder.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/error.h"

namespace folio {
namespace {

// Heap order: the lowest rank on top, then the leftmost.
bool lower_priority(const BytePairEncoder::Scratch::Candidate& a, const BytePairEncoder::Scratch::Candidate& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

BytePairEncoder::BytePairEncoder(const Vocab& vocab) : vocab_(vocab) {
  for (int byte = 0; byte < 256; ++byte) byte_tokens_[byte] = vocab.find(byte_map_.encode(byte));

  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, vocab.merges.size() * 2));
  merges_.assign(capacity, Merge{});
  mask_ = capacity - 1;
  std::string joined;
  for (std::size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string_view merge = vocab.merges[rank];
    const std::size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos)
      fail("merge {} \"{}\" has no space between its two parts; the vocab is broken, convert the model again",
           rank, merge);
    const std::string_view left = merge.substr(0, space);
    const std::string_view right = merge.substr(space + 1);
    const TokenId left_id = vocab.find(left);
    const TokenId right_id = vocab.find(right);
    joined.assign(left).append(right);
    const TokenId result = vocab.find(joined);
    for (auto [text, id] : {std::pair{left, left_id}, std::pair{right, right_id},
                            std::pair{std::string_view(joined), result}}) {
      if (id < 0)
        fail("merge {} \"{}\" needs \"{}\", which is not a token; the vocab is broken, convert the model again",
             rank, merge, text);
    }
    // A pair listed twice keeps its first (lowest) rank, as in llama.cpp.
    const std::uint64_t k = key(left_id, right_id);
    std::size_t i = slot_of(k) & mask_;
    while (merges_[i].key != kEmpty && merges_[i].key != k) i = (i + 1) & mask_;
    if (merges_[i].key == kEmpty) {
      merges_[i] = {k, static_cast<std::int32_t>(rank), result};
      ++num_merges_;
    }
  }
}

const BytePairEncoder::Merge* BytePairEncoder::find_merge(TokenId left, TokenId right) const {
  const std::uint64_t k = key(left, right);
  for (std::size_t i = slot_of(k) & mask_;; i = (i + 1) & mask_) {
    if (merges_[i].key == k) return &merges_[i];
    if (merges_[i].key == kEmpty) return nullptr;
  }
}

void BytePairEncoder::push_candidate(std::int32_t left, Scratch& scratch) const {
  if (left < 0) return;
  const std::int32_t right = scratch.symbols[left].next;
  if (right < 0) return;
  const TokenId left_id = scratch.symbols[left].id;
  const TokenId right_id = scratch.symbols[right].id;
  if (left_id < 0 || right_id < 0) return;
  const Merge* merge = find_merge(left_id, right_id);
  if (merge == nullptr) return;
  scratch.heap.push_back({merge->rank, left, left_id, right_id, merge->result});
  std::push_heap(scratch.heap.begin(), scratch.heap.end(), lower_priority);
}

void BytePairEncoder::encode_word(std::string_view word, std::vector<TokenId>& out, Scratch& scratch) const {
  if (word.empty()) return;
  if (vocab_.ignore_merges) {
    std::string& text = scratch.text;
    text.clear();
    for (char c : word) text += byte_map_.encode(static_cast<std::uint8_t>(c));
    const TokenId whole = vocab_.find(text);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  if (word.size() == 1) {
    const TokenId id = byte_tokens_[static_cast<std::uint8_t>(word[0])];
    if (id >= 0) out.push_back(id);
    return;
  }

  auto& symbols = scratch.symbols;
  symbols.clear();
  const auto n = static_cast<std::int32_t>(word.size());
  for (std::int32_t i = 0; i < n; ++i)
    symbols.push_back({byte_tokens_[static_cast<std::uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1});
  scratch.heap.clear();
  for (std::int32_t i = 0; i + 1 < n; ++i) push_candidate(i, scratch);

  while (!scratch.heap.empty()) {
    std::pop_heap(scratch.heap.begin(), scratch.heap.end(), lower_priority);
    const Scratch::Candidate c = scratch.heap.back();
    scratch.heap.pop_back();
    Scratch::Symbol& left = symbols[c.left];
    if (left.id != c.left_id || left.next < 0) continue;  // the left symbol changed or died
    Scratch::Symbol& right = symbols[left.next];
    if (right.id != c.right_id) continue;  // the right symbol changed
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    right.id = -2;
    push_candidate(left.prev, scratch);
    push_candidate(c.left, scratch);
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next)
    if (symbols[i].id >= 0) out.push_back(symbols[i].id);
}

}  // namespace folio
