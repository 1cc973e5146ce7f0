// SpecialTokenPartition: which special tokens are cut out of the text, and in
// what order they claim it (llama.cpp's tokenizer_st_partition).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/special_token_partition.h"
#include "tokenizer/test_vocabs.h"

namespace folio {
namespace {

// Fragments shown as text: raw runs as they are, tokens as [text].
std::vector<std::string> parts(const Vocab& v, const std::string& text, bool parse_special,
                               std::vector<TextRange> literal = {}) {
  SpecialTokenPartition partition(v);
  std::vector<SpecialTokenPartition::Fragment> fragments;
  partition.split(text, parse_special, fragments, literal);
  std::vector<std::string> out;
  std::uint32_t expect_begin = 0;
  for (const auto& f : fragments) {
    EXPECT_EQ(f.begin, expect_begin);
    EXPECT_LT(f.begin, f.end);
    expect_begin = f.end;
    const std::string piece = text.substr(f.begin, f.end - f.begin);
    if (f.token >= 0) {
      EXPECT_EQ(v.tokens[f.token], piece);
    }
    out.push_back(f.token >= 0 ? "[" + piece + "]" : piece);
  }
  EXPECT_EQ(expect_begin, text.size());
  return out;
}

Vocab test_vocab() {
  Vocab v = testing::byte_level_vocab({"a b"}, {{"<|ctl|>", TokenType::kControl},
                                                {"<|ctl|>x", TokenType::kControl},
                                                {"<ud>", TokenType::kUserDefined},
                                                {"<unk>", TokenType::kUnknown},
                                                {"abcd", TokenType::kControl},
                                                {"xab", TokenType::kControl},
                                                {"qq", TokenType::kUserDefined},
                                                {"<plain>", TokenType::kNormal}});
  v.finish();
  return v;
}

using Parts = std::vector<std::string>;

TEST(SpecialTokenPartitionTest, ControlTokensOnlyWithParseSpecialUserDefinedAlways) {
  const Vocab v = test_vocab();
  EXPECT_EQ(parts(v, "<|ctl|> <ud> <unk>", false), (Parts{"<|ctl|> ", "[<ud>]", " <unk>"}));
  EXPECT_EQ(parts(v, "<|ctl|> <ud> <unk>", true), (Parts{"[<|ctl|>]", " ", "[<ud>]", " ", "[<unk>]"}));
  // Normal tokens are never cut out, whatever they look like.
  EXPECT_EQ(parts(v, "<plain>", true), (Parts{"<plain>"}));
}

TEST(SpecialTokenPartitionTest, LiteralRangesReadNoControlTokenButUserDefinedStill) {
  const Vocab v = test_vocab();
  //                    0      7 8     15 16 19
  const std::string t = "<|ctl|> <|ctl|> <ud>";
  // The second <|ctl|> lies in user text: it stays text; the first does not.
  EXPECT_EQ(parts(v, t, true, {{8, 20}}), (Parts{"[<|ctl|>]", " <|ctl|> ", "[<ud>]"}));
  // A token that only overlaps the range (starts in template text) stays text too.
  EXPECT_EQ(parts(v, t, true, {{3, 4}}), (Parts{"<|ctl|> ", "[<|ctl|>]", " ", "[<ud>]"}));
  // "<|ctl|>x" is refused in user text; the shorter "<|ctl|>" before it is
  // outside and is read.
  EXPECT_EQ(parts(v, "<|ctl|>x", true, {{7, 8}}), (Parts{"[<|ctl|>]", "x"}));
  // A refused occurrence does not hide a later one outside the range.
  EXPECT_EQ(parts(v, "xabxab", true, {{0, 2}}), (Parts{"xab", "[xab]"}));
  // Without literal ranges nothing changes.
  EXPECT_EQ(parts(v, t, true, {}), (Parts{"[<|ctl|>]", " ", "[<|ctl|>]", " ", "[<ud>]"}));
}

TEST(SpecialTokenPartitionTest, LongerTokensClaimTextFirst) {
  const Vocab v = test_vocab();
  EXPECT_EQ(parts(v, "<|ctl|>x<|ctl|>", true), (Parts{"[<|ctl|>x]", "[<|ctl|>]"}));
  // "abcd" outranks "xab" though "xab" starts earlier.
  EXPECT_EQ(parts(v, "xabcd", true), (Parts{"x", "[abcd]"}));
  EXPECT_EQ(parts(v, "xab", true), (Parts{"[xab]"}));
}

TEST(SpecialTokenPartitionTest, LeftmostNonOverlappingOccurrences) {
  const Vocab v = test_vocab();
  EXPECT_EQ(parts(v, "qqq", false), (Parts{"[qq]", "q"}));
  EXPECT_EQ(parts(v, "qqqq<ud><ud>", false), (Parts{"[qq]", "[qq]", "[<ud>]", "[<ud>]"}));
  EXPECT_EQ(parts(v, "<ud", false), (Parts{"<ud"}));
  EXPECT_EQ(parts(v, "", true), (Parts{}));
  EXPECT_EQ(parts(v, "no specials here", true), (Parts{"no specials here"}));
}

TEST(SpecialTokenPartitionTest, OrderIsByLengthThenId) {
  const Vocab v = test_vocab();
  SpecialTokenPartition partition(v);
  std::vector<std::size_t> lengths;
  for (TokenId id : partition.tokens()) lengths.push_back(v.tokens[id].size());
  EXPECT_TRUE(std::is_sorted(lengths.rbegin(), lengths.rend()));
  EXPECT_EQ(partition.tokens().size(), 7u);
}

}  // namespace
}  // namespace folio
