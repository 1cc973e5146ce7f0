// Small reads of model output as it streams, shared by the parsers that
// split it (tool calls, reasoning) and the chat prompt's continuation cut.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace folio::server {

// JSON's white space (what models put around tags and between calls).
inline bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view trim_left(std::string_view s) {
  while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
  return s;
}

inline std::string_view trim_right(std::string_view s) {
  while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
  return s;
}

// The length of the longest end of `text` that `tag` starts with (a tag the
// stream has cut off, to hold back until the rest comes).
inline std::size_t partial_tag(std::string_view text, std::string_view tag) {
  for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace folio::server
