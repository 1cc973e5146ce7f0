// UTF-8 for the tokenizer: strict validation (what may reach a user: no
// overlong forms, no surrogates, nothing above U+10FFFF) and llama.cpp's lenient
// decoding (what its tokenizer sees). Pure functions over bytes.
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

// `text` with every invalid maximal subpart (and an incomplete end) replaced by
// U+FFFD, as Python's errors="replace" does.
std::string replace_invalid(std::string_view text);

}  // namespace folio::utf8
