#include "tokenizer/special_token_partition.h"

#include <algorithm>

#include "core/error.h"

namespace folio {

SpecialTokenPartition::SpecialTokenPartition(const Vocab& vocab) : vocab_(vocab) {
  for (TokenId id = 0; id < vocab.size(); ++id)
    if (vocab.attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) tokens_.push_back(id);
  std::stable_sort(tokens_.begin(), tokens_.end(), [&](TokenId a, TokenId b) {
    return vocab.tokens[a].size() > vocab.tokens[b].size();
  });

  trie_.emplace_back();
  always_.resize(tokens_.size());
  for (std::size_t rank = 0; rank < tokens_.size(); ++rank) {
    const TokenId id = tokens_[rank];
    always_[rank] = (vocab.attrs[id] & (kAttrControl | kAttrUnknown)) == 0;
    std::int32_t node = 0;
    for (char c : vocab.tokens[id]) {
      const auto byte = static_cast<unsigned char>(c);
      std::int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<std::int32_t>(trie_.size());
        trie_.emplace_back();
        auto& children = trie_[node].children;
        children.insert(std::upper_bound(children.begin(), children.end(), std::make_pair(byte, -1)),
                        {byte, next});
      }
      node = next;
    }
    trie_[node].rank = static_cast<std::int32_t>(rank);
    first_byte_[static_cast<unsigned char>(vocab.tokens[id][0])] = true;
  }
}

std::int32_t SpecialTokenPartition::child(std::int32_t node, unsigned char byte) const {
  const auto& children = trie_[node].children;
  auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, std::int32_t{-1}));
  return it != children.end() && it->first == byte ? it->second : -1;
}

namespace {

// Whether bytes [begin, end) overlap one of the sorted ranges.
bool overlaps(std::span<const TextRange> ranges, std::size_t begin, std::size_t end) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](std::size_t pos, const TextRange& r) { return pos < r.end; });
  return it != ranges.end() && it->begin < end;
}

}  // namespace

void SpecialTokenPartition::split(std::string_view text, bool parse_special, std::vector<Fragment>& fragments,
                                  std::span<const TextRange> literal) const {
  fragments.clear();
  if (text.empty()) return;
  FOLIO_CHECK(text.size() < (std::size_t{1} << 32));
  fragments.push_back({-1, 0, static_cast<std::uint32_t>(text.size())});
  if (tokens_.empty()) return;

  // Which tokens occur at all (anywhere, overlaps included).
  std::vector<std::int32_t> found;
  std::vector<bool> seen;
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) continue;
    std::int32_t node = 0;
    for (std::size_t i = pos; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      const std::int32_t rank = trie_[node].rank;
      if (rank < 0 || !(parse_special || always_[rank])) continue;
      if (seen.empty()) seen.resize(tokens_.size());
      if (!seen[rank]) {
        seen[rank] = true;
        found.push_back(rank);
      }
    }
  }
  if (found.empty()) return;
  std::sort(found.begin(), found.end());

  // Each token in turn claims its leftmost non-overlapping occurrences in the
  // raw fragments that are left.
  std::vector<Fragment> next;
  for (std::int32_t rank : found) {
    const TokenId id = tokens_[rank];
    const std::string_view token = vocab_.tokens[id];
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view raw = text.substr(f.begin, f.end - f.begin);
      const bool checked = !always_[rank] && !literal.empty();
      std::size_t done = 0, from = 0;
      for (std::size_t at; (at = raw.find(token, from)) != std::string_view::npos;) {
        if (checked && overlaps(literal, f.begin + at, f.begin + at + token.size())) {
          from = at + 1;  // user text: this occurrence stays raw
          continue;
        }
        if (at > done) next.push_back({-1, f.begin + static_cast<std::uint32_t>(done), f.begin + static_cast<std::uint32_t>(at)});
        next.push_back({id, f.begin + static_cast<std::uint32_t>(at),
                        f.begin + static_cast<std::uint32_t>(at + token.size())});
        done = from = at + token.size();
      }
      if (done < raw.size()) next.push_back({-1, f.begin + static_cast<std::uint32_t>(done), f.end});
    }
    fragments.swap(next);
  }
}

}  // namespace folio
