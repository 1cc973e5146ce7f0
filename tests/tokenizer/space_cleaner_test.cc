// SpaceCleaner: llama.cpp's detokenizer clean-up for clean_spaces vocabs, in
// batch and streamed in random pieces, against a plain in-place version of
// the three passes written the way llama.cpp states them.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "tokenizer/space_cleaner.h"

namespace folio {
namespace {

// The three passes over one buffer, compacting in place: each reads the
// buffer's current bytes, so a byte the second pass blanks is seen blanked.
std::string reference_clean(std::string text) {
  auto pass = [&](auto&& step) {
    const std::size_t n = text.size();
    std::size_t total = n ? 1 : 0;
    for (std::size_t i = 1; i < n; ++i) step(i, n, total);
    text.resize(total);
  };
  pass([&](std::size_t& i, std::size_t, std::size_t& total) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  });
  pass([&](std::size_t& i, std::size_t n, std::size_t& total) {
    const char x = text[i];
    if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  });
  pass([&](std::size_t& i, std::size_t n, std::size_t& total) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if ((x1 == 'r' || x1 == 'v') && i + 2 < n && text[i + 2] == 'e') {
        --total;
      }
    }
    text[total++] = x;
  });
  return text;
}

TEST(SpaceCleanerTest, Examples) {
  EXPECT_EQ(SpaceCleaner::clean("Hello , world ! Why ? Fine ."), "Hello, world! Why? Fine.");
  EXPECT_EQ(SpaceCleaner::clean("a ' b"), "a'b");
  EXPECT_EQ(SpaceCleaner::clean("it 's I 'm we 're you 've"), "it's I'm we're you've");
  EXPECT_EQ(SpaceCleaner::clean("don 't I 'd they 'll"), "don 't I 'd they 'll");
  EXPECT_EQ(SpaceCleaner::clean(" ."), ".");
  EXPECT_EQ(SpaceCleaner::clean("x 'r"), "x 'r");
  // The space a lone apostrophe consumes cannot also precede the next one.
  EXPECT_EQ(SpaceCleaner::clean(" ' ' "), "'' ");
  EXPECT_EQ(SpaceCleaner::clean(""), "");
}

TEST(SpaceCleanerTest, BatchEqualsInPlaceReferenceAndStreaming) {
  std::mt19937 rng(1234);
  const std::string alphabet = "  ''.,?!smrvetdlx\xE2\x80\x99";
  for (int round = 0; round < 20000; ++round) {
    std::string s;
    const int n = static_cast<int>(rng() % 14);
    for (int i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
    const std::string batch = SpaceCleaner::clean(s);
    ASSERT_EQ(batch, reference_clean(s)) << '"' << s << '"';

    SpaceCleaner cleaner;
    std::string streamed;
    for (std::size_t pos = 0; pos < s.size();) {
      const std::size_t len = 1 + rng() % 3;
      streamed += cleaner.feed(std::string_view(s).substr(pos, len));
      pos += len;
    }
    streamed += cleaner.finish();
    ASSERT_EQ(streamed, batch) << '"' << s << '"';
  }
}

}  // namespace
}  // namespace folio
