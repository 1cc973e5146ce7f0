// TextRange: bytes [begin, end) of a text, as the tokenizer's callers mark
// where user text lies inside a rendered prompt.
#pragma once

#include <cstddef>

namespace folio {

struct TextRange {
  std::size_t begin = 0;
  std::size_t end = 0;
};

}  // namespace folio
