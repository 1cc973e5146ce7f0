// Text as the API hands it to clients: JSON strings must be valid UTF-8, and
// OpenAI's text offsets count characters. The one place the server does
// either (the tokenizer's utf8.h holds the decoding rules).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/utf8.h"

namespace folio::server {

// `bytes` with every invalid sequence (and an incomplete end) as U+FFFD.
inline std::string client_text(std::string_view bytes) { return utf8::replace_invalid(bytes); }

// Characters (code points) of UTF-8 text; a stray byte counts as one.
inline std::int64_t num_characters(std::string_view text) {
  std::int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace folio::server
