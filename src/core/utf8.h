// UTF-8, the one set of helpers every module uses: strict validation (what may
// reach a user: no overlong forms, no surrogates, nothing above U+10FFFF),
// llama.cpp's lenient decoding (what its tokenizer sees) and the code-point
// view of text (Jinja's Python strings, OpenAI's character offsets). Pure
// functions over bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace folio::utf8 {

inline constexpr char32_t kReplacement = 0xFFFD;
inline constexpr std::string_view kReplacementText = "\xEF\xBF\xBD";

// The sequence length llama.cpp reads from a lead byte alone: 1 for ASCII and
// for continuation bytes, 2 for C0-DF, 3 for E0-EF, 4 for F0-FF.
inline std::size_t length_from_lead(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// Appends the UTF-8 form of a code point below 0x200000 (surrogates included).
void append(std::string& out, char32_t cp);

// Decodes the code point at `pos` as llama.cpp does and moves `pos` past it:
// the lead byte fixes the length, continuation bytes must follow, and neither
// overlong forms nor surrogates are refused; anything else yields U+FFFD and
// moves one byte.
char32_t decode_lenient(std::string_view text, std::size_t& pos);

// What strictly valid UTF-8 makes of the bytes at the start of `bytes`.
struct Sequence {
  enum Kind {
    kValid,       // a whole character of `length` bytes
    kIncomplete,  // all `length` bytes (the rest of the input) start a character
    kInvalid,     // `length` bytes (the maximal subpart) can never be one
  };
  Kind kind;
  std::size_t length;
};
Sequence next_sequence(std::string_view bytes);

bool is_valid(std::string_view text);

// str.isspace() of one code point, as Python defines it: the set str.split()
// and str.strip() use (and jinja2's `\s`), which templates trim with.
bool is_python_space(char32_t cp);

// The code-point view of text. decode and substr assume valid UTF-8 (they read
// it as decode_lenient does); length counts every byte that is not a
// continuation byte, so a stray byte counts as one.
std::u32string decode(std::string_view text);
std::string encode(std::u32string_view code_points);
std::size_t length(std::string_view text);
// The code points [start, stop) of `text` (indices past the end are clamped).
std::string substr(std::string_view text, std::size_t start, std::size_t stop);

// `text` with every invalid maximal subpart (and an incomplete end) replaced by
// U+FFFD, as Python's errors="replace" does.
std::string replace_invalid(std::string_view text);

}  // namespace folio::utf8
