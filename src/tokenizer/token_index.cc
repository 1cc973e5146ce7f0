#include "tokenizer/token_index.h"

#include <algorithm>
#include <bit>
#include <functional>

namespace folio {

std::uint64_t TokenIndex::hash(std::string_view text) {
  // std::hash spreads its bits well; the multiply mixes the low bits we index by.
  return std::hash<std::string_view>{}(text) * 0x9E3779B97F4A7C15ull;
}

std::int64_t TokenIndex::build(const std::vector<std::string>& texts) {
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, texts.size() * 2));
  slots_.assign(capacity, 0);
  mask_ = capacity - 1;
  size_ = 0;
  std::int64_t first_repeat = -1;
  for (std::size_t id = 0; id < texts.size(); ++id) {
    const std::uint64_t h = hash(texts[id]);
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    std::size_t i = h & mask_;
    bool repeat = false;
    for (; slots_[i] != 0; i = (i + 1) & mask_) {
      const std::uint64_t slot = slots_[i];
      if (static_cast<std::uint32_t>(slot >> 32) == tag && texts[static_cast<std::uint32_t>(slot) - 1] == texts[id]) {
        repeat = true;
        break;
      }
    }
    if (repeat) {
      if (first_repeat < 0) first_repeat = static_cast<std::int64_t>(id);
      continue;
    }
    slots_[i] = (static_cast<std::uint64_t>(tag) << 32) | static_cast<std::uint64_t>(id + 1);
    ++size_;
  }
  return first_repeat;
}

}  // namespace folio
