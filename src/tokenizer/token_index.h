// TokenIndex: token text -> id, an open-addressing hash table over the texts
// a Vocab owns (they are passed to each call, so the index holds no pointer and
// moves and copies with its Vocab). Invariant: every text added is found, and
// the table is never more than half full.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace folio {

class TokenIndex {
 public:
  // Indexes texts[0..n); returns -1, or the first id whose text repeats an
  // earlier one (which stays the one found).
  std::int64_t build(const std::vector<std::string>& texts);

  // The id of `text`, or -1.
  std::int32_t find(std::string_view text, const std::vector<std::string>& texts) const {
    if (slots_.empty()) return -1;
    const std::uint64_t h = hash(text);
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const std::uint64_t slot = slots_[i];
      if (slot == 0) return -1;
      const auto id = static_cast<std::int32_t>(static_cast<std::uint32_t>(slot) - 1);
      if (static_cast<std::uint32_t>(slot >> 32) == tag && texts[id] == text) return id;
    }
  }

  std::size_t size() const { return size_; }

 private:
  static std::uint64_t hash(std::string_view text);

  std::vector<std::uint64_t> slots_;  // (hash tag << 32) | (id + 1); 0 when empty
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace folio
