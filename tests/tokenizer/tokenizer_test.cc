// Tokenizer on small hand-built vocabs: merge order and ties, byte fallback,
// special tokens, BOS/EOS, and the pieces and text that come back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/test_vocabs.h"
#include "tokenizer/tokenizer.h"

namespace folio {
namespace {

using Ids = std::vector<TokenId>;
using testing::byte_level;
using testing::byte_level_vocab;
using testing::sentence_piece_vocab;

// ---- byte-level BPE ------------------------------------------------------

TEST(ByteLevelBpeTest, EqualRanksMergeLeftmostFirst) {
  auto t = Tokenizer::create(byte_level_vocab({"a a"}));
  const TokenId aa = t->vocab().find("aa");
  EXPECT_EQ(t->encode("aaa", false, false), (Ids{aa, 'a'}));
  EXPECT_EQ(t->encode("aaaa", false, false), (Ids{aa, aa}));
}

TEST(ByteLevelBpeTest, LowestRankMergesFirst) {
  auto with_abc = Tokenizer::create(byte_level_vocab({"b c", "a b", "a bc"}));
  EXPECT_EQ(with_abc->encode("abc", false, false), (Ids{with_abc->vocab().find("abc")}));
  // Without "a bc", merging "b c" first leaves "a" alone, though "a b" exists.
  auto without = Tokenizer::create(byte_level_vocab({"b c", "a b"}));
  EXPECT_EQ(without->encode("abc", false, false), (Ids{'a', without->vocab().find("bc")}));
}

TEST(ByteLevelBpeTest, BytesAreSpelledByteLevel) {
  auto t = Tokenizer::create(byte_level_vocab({"Ġ t", "Ġt o"}));
  EXPECT_EQ(t->encode(" to", false, false), (Ids{t->vocab().find(byte_level(" to"))}));
  // "é" is two bytes, each its own token with no merge.
  EXPECT_EQ(t->encode("\xC3\xA9", false, false), (Ids{0xC3, 0xA9}));
}

TEST(ByteLevelBpeTest, IgnoreMergesTakesWholeWords) {
  Vocab v = byte_level_vocab({"a b"}, {{"xyz", TokenType::kNormal}}, "llama-bpe");
  v.add_bos = false;
  auto llama3 = Tokenizer::create(v);
  EXPECT_EQ(llama3->encode("xyz", false, false), (Ids{llama3->vocab().find("xyz")}));
  auto gpt2 = Tokenizer::create(byte_level_vocab({"a b"}, {{"xyz", TokenType::kNormal}}));
  EXPECT_EQ(gpt2->encode("xyz", false, false), (Ids{'x', 'y', 'z'}));
}

TEST(ByteLevelBpeTest, ByteWithoutATokenIsDropped) {
  Vocab v = byte_level_vocab({"a b"});
  v.tokens['q'] = "<no q>";
  auto t = Tokenizer::create(v);
  EXPECT_EQ(t->encode("aqb", false, false), (Ids{'a', 'b'}));
}

TEST(ByteLevelBpeTest, InvalidUtf8IsReadAsReplacementCharacters) {
  // llama.cpp's byte-level path decodes leniently: a bad byte becomes U+FFFD.
  auto t = Tokenizer::create(byte_level_vocab({"a b"}));
  EXPECT_EQ(t->encode("a\xFF", false, false), (Ids{'a', 0xEF, 0xBF, 0xBD}));
  // An overlong NUL is re-encoded as a plain NUL.
  EXPECT_EQ(t->encode("\xC0\x80", false, false), (Ids{0}));
}

TEST(ByteLevelBpeTest, SpecialTokensAndBosEos) {
  Vocab v = byte_level_vocab({"a b"}, {{"<s>", TokenType::kControl},
                                       {"</s>", TokenType::kControl},
                                       {"<tool>", TokenType::kUserDefined}});
  v.finish();
  v.bos_id = v.find("<s>");
  v.eos_id = v.find("</s>");
  v.add_bos = true;
  v.add_eos = true;
  v.finish();
  auto t = Tokenizer::create(v);
  const TokenId bos = v.bos_id, eos = v.eos_id, tool = v.find("<tool>"), ab = v.find("ab");
  EXPECT_EQ(t->encode("ab", true, false), (Ids{bos, ab, eos}));
  EXPECT_EQ(t->encode("", true, false), (Ids{bos, eos}));
  EXPECT_EQ(t->encode("", false, false), (Ids{}));
  EXPECT_EQ(t->encode("<s>ab<tool>", false, false), (Ids{'<', 's', '>', ab, tool}));
  EXPECT_EQ(t->encode("<s>ab<tool>", false, true), (Ids{bos, ab, tool}));

  EXPECT_EQ(t->decode(Ids{bos, ab, tool, eos}, false), "ab<tool>");
  EXPECT_EQ(t->decode(Ids{bos, ab, tool, eos}, true), "<s>ab<tool></s>");
  EXPECT_EQ(t->token_to_piece(bos, false), "");
  EXPECT_EQ(t->token_to_piece(bos, true), "<s>");
}

TEST(ByteLevelBpeTest, PiecesOfByteLevelTokens) {
  auto t = Tokenizer::create(byte_level_vocab({"Ġ t"}, {{"\xE2\x82\xAC", TokenType::kNormal},
                                                        {"[PAD1]", TokenType::kUnused}}));
  EXPECT_EQ(t->token_to_piece(t->vocab().find("Ġt"), false), " t");
  EXPECT_EQ(t->token_to_piece(0x0A, false), "\n");
  // A character that stands for no byte is shown as llama.cpp shows it.
  EXPECT_EQ(t->token_to_piece(t->vocab().find("\xE2\x82\xAC"), false), "[UNK_BYTE_0xe282ac\xE2\x82\xAC]");
  // Unused tokens have no text.
  EXPECT_EQ(t->token_to_piece(t->vocab().find("[PAD1]"), true), "");
}

TEST(ByteLevelBpeTest, IdsOutsideTheVocabAreErrors) {
  auto t = Tokenizer::create(byte_level_vocab({"a b"}));
  EXPECT_THROW(t->token_to_piece(-1, true), Error);
  EXPECT_THROW(t->token_to_piece(257, true), Error);
  EXPECT_THROW(t->decode(Ids{'a', 100000}, true), Error);
}

TEST(ByteLevelBpeTest, CleanSpacesVocabsTidyDecodedText) {
  // gpt-2 sets clean_spaces; qwen2 does not.
  auto gpt2 = Tokenizer::create(byte_level_vocab({"a b"}));
  auto qwen2 = Tokenizer::create(byte_level_vocab({"a b"}, {}, "qwen2"));
  const std::string text = "x , it 's";
  EXPECT_EQ(gpt2->decode(gpt2->encode(text, false, false), false), "x, it's");
  EXPECT_EQ(qwen2->decode(qwen2->encode(text, false, false), false), text);
}

// ---- SentencePiece BPE ---------------------------------------------------

constexpr const char* kSpace = "\xE2\x96\x81";

TEST(SentencePieceTest, HighestScoreMergesFirstAndTiesGoLeft) {
  Vocab v = sentence_piece_vocab({{"a", -10}, {"b", -10}, {"c", -10}, {"aa", -1}, {"ab", -3}, {"bc", -2}});
  v.add_space_prefix = false;
  v.finish();
  auto t = Tokenizer::create(v);
  const TokenId a = v.find("a"), aa = v.find("aa"), bc = v.find("bc");
  EXPECT_EQ(t->encode("aaa", false, false), (Ids{aa, a}));
  EXPECT_EQ(t->encode("abc", false, false), (Ids{a, bc}));  // "bc" (-2) beats "ab" (-3)

  Vocab with_abc = sentence_piece_vocab({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -3}, {"bc", -2}, {"abc", -1}});
  with_abc.add_space_prefix = false;
  with_abc.finish();
  auto t2 = Tokenizer::create(with_abc);
  EXPECT_EQ(t2->encode("abc", false, false), (Ids{with_abc.find("abc")}));
}

TEST(SentencePieceTest, UnknownCharactersFallBackToBytes) {
  Vocab v = sentence_piece_vocab({{"a", -1}, {"b", -1}, {"ab", -0.5}});
  v.add_space_prefix = false;
  auto t = Tokenizer::create(v);
  const TokenId byte0 = 3;  // <0x00>
  EXPECT_EQ(t->encode("\xC3\xA9", false, false), (Ids{byte0 + 0xC3, byte0 + 0xA9}));
  // The lead byte alone fixes a character's length, so 0xFF swallows "ab".
  EXPECT_EQ(t->encode("\xFF" "ab", false, false), (Ids{byte0 + 0xFF, byte0 + 'a', byte0 + 'b'}));
  EXPECT_EQ(t->decode(Ids{byte0 + 0xC3, byte0 + 0xA9}, false), "\xC3\xA9");
}

TEST(SentencePieceTest, SpacesBecomeLowerBlocksWithAPrefix) {
  Vocab v = sentence_piece_vocab({{std::string(kSpace), -5}, {std::string(kSpace) + "x", -1},
                                  {std::string(kSpace) + "y", -1}},
                                 {{"<ctl>", TokenType::kControl}});
  v.finish();
  auto t = Tokenizer::create(v);
  const TokenId x = v.find(std::string(kSpace) + "x"), y = v.find(std::string(kSpace) + "y"), ctl = v.find("<ctl>");
  EXPECT_EQ(t->encode("x y", true, false), (Ids{1, x, y}));
  // A run after a special token gets the prefix space again.
  EXPECT_EQ(t->encode("x<ctl>y", false, true), (Ids{x, ctl, y}));
  // Decoding drops the first token's prefix space, but only the first token's.
  EXPECT_EQ(t->decode(Ids{x, y}, false), "x y");
  EXPECT_EQ(t->decode(Ids{1, x, y}, false), " x y");
}

}  // namespace
}  // namespace folio
