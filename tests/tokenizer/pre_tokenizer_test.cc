// PreTokenizer: each family's split on tricky inputs (expected pieces worked
// out from llama.cpp's regexes), and the code points whose class llama.cpp's
// Unicode tables give differently from PCRE2's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace folio {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(PreTokenizerKind kind, const std::string& text) { return PreTokenizer(kind).split(text); }

TEST(PreTokenizerTest, Gpt2) {
  const auto k = PreTokenizerKind::kGpt2;
  EXPECT_EQ(split(k, "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split(k, "I'm 12 years  old!!"), (Pieces{"I", "'m", " 12", " years", " ", " old", "!!"}));
  // Contractions are lower case only; "'S" is punctuation then a letter.
  EXPECT_EQ(split(k, "IT'S"), (Pieces{"IT", "'", "S"}));
  // A lone whitespace before a non-space matches nothing: it is a piece between matches.
  EXPECT_EQ(split(k, "a\t\tb"), (Pieces{"a", "\t", "\t", "b"}));
  EXPECT_EQ(split(k, "x  \n"), (Pieces{"x", "  \n"}));
  EXPECT_EQ(split(k, " 3.14"), (Pieces{" 3", ".", "14"}));
  EXPECT_EQ(split(k, ""), (Pieces{}));
}

TEST(PreTokenizerTest, Llama3) {
  const auto k = PreTokenizerKind::kLlama3;
  EXPECT_EQ(split(k, "I'M 1234567 ok"), (Pieces{"I", "'M", " ", "123", "456", "7", " ok"}));
  EXPECT_EQ(split(k, "line\r\n\n  next"), (Pieces{"line", "\r\n\n", " ", " next"}));
  EXPECT_EQ(split(k, "!!!\n\nfoo"), (Pieces{"!!!\n\n", "foo"}));
  // One non-letter, non-digit may lead a word.
  EXPECT_EQ(split(k, "$x (y)"), (Pieces{"$x", " (", "y", ")"}));
  EXPECT_EQ(split(k, "end   "), (Pieces{"end", "   "}));
}

TEST(PreTokenizerTest, Qwen2SplitsEveryDigit) {
  const auto k = PreTokenizerKind::kQwen2;
  EXPECT_EQ(split(k, "x1234 ٣٤"), (Pieces{"x", "1", "2", "3", "4", " ", "٣", "٤"}));
  EXPECT_EQ(split(k, "we'LL see"), (Pieces{"we", "'LL", " see"}));
}

TEST(PreTokenizerTest, SmolLMSplitsDigitsBeforeGpt2) {
  // Digits are cut out first, so the space before them stands alone.
  EXPECT_EQ(split(PreTokenizerKind::kSmolLM, "abc 123def"), (Pieces{"abc", " ", "1", "2", "3", "def"}));
  EXPECT_EQ(split(PreTokenizerKind::kGpt2, "abc 123def"), (Pieces{"abc", " 123", "def"}));
}

TEST(PreTokenizerTest, DefaultCutsPunctuationAndThreeDigitGroups) {
  EXPECT_EQ(split(PreTokenizerKind::kDefault, "a+=b, 12345"), (Pieces{"a", "+=", "b", ",", " ", "123", "45"}));
}

TEST(PreTokenizerTest, PiecesTileTheText) {
  const std::string text = "Ünïcödé\u00a0\u3000テキスト 😀👍🏽 x=1;\r\n\t\t'twas 1e10";
  for (auto kind : {PreTokenizerKind::kDefault, PreTokenizerKind::kGpt2, PreTokenizerKind::kLlama3,
                    PreTokenizerKind::kSmolLM, PreTokenizerKind::kQwen2}) {
    std::string joined;
    for (const std::string& p : split(kind, text)) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, text);
  }
}

// Code points whose class differs between llama.cpp's tables (Unicode 15.1)
// and PCRE2 10.42's (Unicode 14): each case splits differently under PCRE2's
// own classes.
TEST(PreTokenizerTest, ClassesFollowLlamaCppsUnicodeTables) {
  // U+180E is no white space to llama.cpp: it joins the space before it.
  EXPECT_EQ(split(PreTokenizerKind::kGpt2, "a \u180e" "b"), (Pieces{"a", " \u180e", "b"}));
  // Kawi letters (new in 15.0) continue a word.
  EXPECT_EQ(split(PreTokenizerKind::kGpt2, "a\U00011F04\U00011F05"), (Pieces{"a\U00011F04\U00011F05"}));
  // CJK extension H (15.0) and I (15.1) are letters.
  EXPECT_EQ(split(PreTokenizerKind::kLlama3, "x\U00031350\U0002EBF0"), (Pieces{"x\U00031350\U0002EBF0"}));
  // Kawi digits are digits, one piece each for Qwen2.
  EXPECT_EQ(split(PreTokenizerKind::kQwen2, "\U00011F50\U00011F51"), (Pieces{"\U00011F50", "\U00011F51"}));
  // Kawi punctuation is punctuation for the default family's first regex.
  EXPECT_EQ(split(PreTokenizerKind::kDefault, "x\U00011F43\U00011F43!"), (Pieces{"x", "\U00011F43\U00011F43!"}));
  // U+0085 is white space to both.
  EXPECT_EQ(split(PreTokenizerKind::kGpt2, "a\u0085\u0085b"), (Pieces{"a", "\u0085", "\u0085", "b"}));
}

TEST(PreTokenizerTest, SurrogatesFromLenientDecodingAreNotLetters) {
  // llama.cpp's decoder lets an encoded surrogate through; it matches as "other".
  EXPECT_EQ(split(PreTokenizerKind::kGpt2, "a\xED\xA0\x80z"), (Pieces{"a", "\xED\xA0\x80", "z"}));
}

TEST(PreTokenizerTest, LongRunsDoNotExhaustTheRegexEngine) {
  const std::string spaces(200000, ' ');
  const std::string letters(200000, 'x');
  EXPECT_EQ(split(PreTokenizerKind::kLlama3, spaces + "a"), (Pieces{spaces.substr(1), " a"}));
  EXPECT_EQ(split(PreTokenizerKind::kQwen2, letters), (Pieces{letters}));
}

}  // namespace
}  // namespace folio
