// Python's str semantics over UTF-8 bytes, as jinja2's filters and string
// methods use them: lengths, indices and slices count code points, and
// whitespace, case and repr() follow CPython. Inputs must be valid UTF-8
// (core/utf8.h holds the code-point view itself: decode, length, substr).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace folio::jinja {

// str.strip/lstrip/rstrip; `chars` unset strips whitespace.
std::string py_strip(std::string_view text, const std::optional<std::string>& chars, bool left,
                     bool right);
// str.split(sep, maxsplit) / str.rsplit; an unset sep splits on whitespace runs.
std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep,
                                  std::int64_t maxsplit, bool from_right);
std::vector<std::string> py_splitlines(std::string_view text, bool keepends);
// str.replace(old, new, count); count < 0 replaces all.
std::string py_replace(std::string_view text, std::string_view old_text, std::string_view new_text,
                       std::int64_t count);
// str.count(sub), str.find(sub) in code points (-1 when absent).
std::int64_t py_count(std::string_view text, std::string_view sub);
std::int64_t py_find(std::string_view text, std::string_view sub, bool from_right);

// Case mapping. Covers ASCII, Latin-1, Latin Extended-A, basic Greek and
// Cyrillic and fullwidth Latin; other code points are left as they are.
std::string py_upper(std::string_view text);
std::string py_lower(std::string_view text);
std::string py_capitalize(std::string_view text);  // str.capitalize()
std::string py_title(std::string_view text);       // str.title()
std::string jinja_title(std::string_view text);    // jinja2's |title filter (its own word split)
bool py_islower(std::string_view text);
bool py_isupper(std::string_view text);
bool py_isdigit(std::string_view text);
bool py_isalpha(std::string_view text);
bool py_isalnum(std::string_view text);
bool py_isspace_str(std::string_view text);
bool py_is_word_char(char32_t cp);  // what `\w` matches (letters, digits, underscore)

// repr() of a str: single quotes unless it holds ' and no ", escapes as CPython.
std::string py_repr(std::string_view text);
// repr() of a float: shortest round-trip digits, CPython's fixed/exponent switch.
std::string py_float_repr(double value);
// markupsafe.escape(): & < > " ' as HTML entities.
std::string html_escape(std::string_view text);

}  // namespace folio::jinja
