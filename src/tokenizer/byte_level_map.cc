#include "tokenizer/byte_level_map.h"

#include "core/utf8.h"

namespace folio {
namespace {

bool stands_for_itself(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

}  // namespace

ByteLevelMap::ByteLevelMap() {
  decoded_.fill(-1);
  char32_t next = 0x100;
  for (int byte = 0; byte < 256; ++byte) {
    const char32_t cp = stands_for_itself(byte) ? static_cast<char32_t>(byte) : next++;
    utf8::append(encoded_[byte], cp);
    decoded_[cp] = static_cast<std::int16_t>(byte);
  }
}

}  // namespace folio
