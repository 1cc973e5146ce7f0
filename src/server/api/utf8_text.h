// Text as the API hands it to clients: JSON strings must be valid UTF-8, and
// OpenAI's text offsets count characters. The one place the server does
// either (core/utf8.h holds the decoding rules).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.h"

namespace folio::server {

// `bytes` with every invalid sequence (and an incomplete end) as U+FFFD.
inline std::string client_text(std::string_view bytes) { return utf8::replace_invalid(bytes); }

// Characters (code points) of UTF-8 text; a stray byte counts as one.
inline std::int64_t num_characters(std::string_view text) { return static_cast<std::int64_t>(utf8::length(text)); }

}  // namespace folio::server
