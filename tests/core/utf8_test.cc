// UTF-8 helpers: strict classification (Unicode's maximal subparts, as
// Python's errors="replace" uses them) and llama.cpp's lenient decoding.
#include <gtest/gtest.h>

#include <string>

#include "core/utf8.h"

namespace folio {
namespace {

constexpr const char* kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, NextSequence) {
  using S = utf8::Sequence;
  auto check = [](std::string_view bytes, S::Kind kind, std::size_t length) {
    const S s = utf8::next_sequence(bytes);
    EXPECT_EQ(s.kind, kind) << "input of " << bytes.size() << " bytes";
    EXPECT_EQ(s.length, length);
  };
  check("a", S::kValid, 1);
  check("\xC3\xA9", S::kValid, 2);
  check("\xF0\x9F\x98\x80", S::kValid, 4);
  check("\xF0\x9F\x98", S::kIncomplete, 3);
  check("\xE2", S::kIncomplete, 1);
  check("\xE2\x28", S::kInvalid, 1);
  check("\xC0\x80", S::kInvalid, 1);        // overlong lead
  check("\xE0\x80\x80", S::kInvalid, 1);    // overlong
  check("\xED\xA0\x80", S::kInvalid, 1);    // surrogate
  check("\xF4\x90\x80\x80", S::kInvalid, 1);  // above U+10FFFF
  check("\xF0\x9F\x98" "a", S::kInvalid, 3);
  check("\x80", S::kInvalid, 1);
  check("\xFF", S::kInvalid, 1);
}

TEST(Utf8Test, ReplaceInvalidMatchesPythonReplace) {
  // b"...".decode("utf-8", errors="replace")
  EXPECT_EQ(utf8::replace_invalid("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(utf8::replace_invalid("\xE2\x82" "a"), std::string(kFffd) + "a");
  EXPECT_EQ(utf8::replace_invalid("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(utf8::replace_invalid("\xED\xA0\x80"), std::string(kFffd) + kFffd + kFffd);
  EXPECT_EQ(utf8::replace_invalid("\xC0\xAF"), std::string(kFffd) + kFffd);
  EXPECT_EQ(utf8::replace_invalid("\xF4\x90\x80\x80"), std::string(kFffd) + kFffd + kFffd + kFffd);
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));
  EXPECT_TRUE(utf8::is_valid("\xF4\x8F\xBF\xBF"));
}

TEST(Utf8Test, LenientDecodingIsLlamaCpps) {
  auto decode = [](std::string_view s) {
    std::vector<char32_t> cps;
    for (std::size_t pos = 0; pos < s.size();) cps.push_back(utf8::decode_lenient(s, pos));
    return cps;
  };
  using Cps = std::vector<char32_t>;
  EXPECT_EQ(decode("a\xC3\xA9"), (Cps{'a', 0xE9}));
  EXPECT_EQ(decode("\xC0\x80"), (Cps{0}));            // overlong forms pass
  EXPECT_EQ(decode("\xED\xA0\x80"), (Cps{0xD800}));   // so do surrogates
  EXPECT_EQ(decode("\xE2\x82"), (Cps{0xFFFD, 0xFFFD}));  // cut short: one byte at a time
  EXPECT_EQ(decode("\xFF" "a"), (Cps{0xFFFD, 'a'}));
}

TEST(Utf8Test, AppendRoundTrips) {
  for (char32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    utf8::append(s, cp);
    std::size_t pos = 0;
    EXPECT_EQ(utf8::decode_lenient(s, pos), cp);
    EXPECT_EQ(pos, s.size());
  }
}

}  // namespace
}  // namespace folio
