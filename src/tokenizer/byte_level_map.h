// ByteLevelMap: GPT-2's reversible map between the 256 byte values and printable
// code points, in which byte-level BPE vocabs spell their tokens. Printable
// Latin-1 bytes stand for themselves; the other 68 take U+0100.. in byte order.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace folio {

class ByteLevelMap {
 public:
  ByteLevelMap();

  // The UTF-8 text of the code point that stands for `byte`.
  std::string_view encode(std::uint8_t byte) const { return encoded_[byte]; }
  // The byte a code point stands for, or -1 when it stands for none.
  int decode(char32_t cp) const { return cp < decoded_.size() ? decoded_[cp] : -1; }

 private:
  std::array<std::string, 256> encoded_;
  std::array<std::int16_t, 324> decoded_;  // indexed by code point; 256 + 68 covers every target
};

}  // namespace folio
