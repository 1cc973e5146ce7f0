// Vocab::finish and Tokenizer::create: broken vocabs are refused with an error
// that says what is wrong; llama.cpp's derived attributes are reproduced.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"
#include "tokenizer/test_vocabs.h"

namespace folio {
namespace {

using ::testing::HasSubstr;
using testing::byte_level_vocab;
using testing::sentence_piece_vocab;

// The message of the Error `f` throws; fails the test when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no Error thrown";
  return {};
}

TEST(VocabTest, MergeNamingAnUnknownTokenIsRefused) {
  Vocab v = byte_level_vocab({"a b"});
  v.merges.push_back("q xyz");  // "xyz" is no token
  v.finish("broken.gguf");
  EXPECT_THAT(error_of([&] { Tokenizer::create(v); }),
              AllOf(HasSubstr("merge 1 \"q xyz\""), HasSubstr("\"xyz\", which is not a token"),
                    HasSubstr("convert the model again")));
}

TEST(VocabTest, MergeWhoseResultIsNoTokenIsRefused) {
  Vocab v = byte_level_vocab({"a b"});
  v.merges.push_back("c d");  // "cd" is no token
  v.finish();
  EXPECT_THAT(error_of([&] { Tokenizer::create(v); }), HasSubstr("needs \"cd\", which is not a token"));
}

TEST(VocabTest, MergeWithoutASpaceIsRefused) {
  Vocab v = byte_level_vocab({"a b"});
  v.merges.push_back("ab");
  v.finish();
  EXPECT_THAT(error_of([&] { Tokenizer::create(v); }), HasSubstr("merge 1 \"ab\" has no space"));
}

TEST(VocabTest, RepeatedTokenIsRefused) {
  Vocab v = byte_level_vocab({"a b"});
  v.tokens.push_back("ab");
  v.types.push_back(TokenType::kNormal);
  EXPECT_THAT(error_of([&] { v.finish("dup.gguf"); }),
              AllOf(HasSubstr("dup.gguf"), HasSubstr("token 257 \"ab\" repeats token 256")));
}

TEST(VocabTest, UnknownPreTokenizerIsRefused) {
  Vocab v = byte_level_vocab({"a b"}, {}, "no-such-pre");
  EXPECT_THAT(error_of([&] { v.finish(); }),
              AllOf(HasSubstr("pre-tokenizer \"no-such-pre\""), HasSubstr("qwen2"), HasSubstr("smollm")));
}

TEST(VocabTest, MissingPiecesAreRefused) {
  Vocab no_merges = byte_level_vocab({});
  EXPECT_THAT(error_of([&] { no_merges.finish(); }), HasSubstr("needs tokenizer.ggml.merges"));

  Vocab no_scores = sentence_piece_vocab({{"\xE2\x96\x81" "a", -1}});
  no_scores.scores.clear();
  EXPECT_THAT(error_of([&] { no_scores.finish(); }), HasSubstr("needs tokenizer.ggml.scores"));

  Vocab short_types = byte_level_vocab({"a b"});
  short_types.types.pop_back();
  EXPECT_THAT(error_of([&] { short_types.finish(); }), HasSubstr("256 token types for 257 tokens"));

  Vocab empty;
  EXPECT_THAT(error_of([&] { empty.finish(); }), HasSubstr("no tokens"));
}

TEST(VocabTest, SpecialIdsMustBeInTheVocab) {
  Vocab out_of_range = byte_level_vocab({"a b"});
  out_of_range.eos_id = 9999;
  EXPECT_THAT(error_of([&] { out_of_range.finish(); }), HasSubstr("special token id 9999 is outside the vocab"));

  Vocab bos_missing = byte_level_vocab({"a b"});
  bos_missing.add_bos = true;
  EXPECT_THAT(error_of([&] { bos_missing.finish(); }), HasSubstr("asks for a BOS token"));
}

TEST(VocabTest, EmptyTokenTextGetsLlamaCppsPlaceholder) {
  Vocab v = byte_level_vocab({"a b"}, {{"", TokenType::kNormal}});
  v.finish();
  EXPECT_EQ(v.tokens.back(), "[EMPTY_257]");
  EXPECT_EQ(v.find("[EMPTY_257]"), 257);
}

TEST(VocabTest, PreTokenizerFamiliesAndFlags) {
  struct Case {
    const char* pre;
    PreTokenizerKind kind;
    bool clean_spaces;
    bool ignore_merges;
  };
  for (const Case& c : {Case{"qwen2", PreTokenizerKind::kQwen2, false, false},
                        Case{"smollm", PreTokenizerKind::kSmolLM, false, false},
                        Case{"starcoder", PreTokenizerKind::kSmolLM, true, false},
                        Case{"llama-bpe", PreTokenizerKind::kLlama3, true, true},
                        Case{"gpt-2", PreTokenizerKind::kGpt2, true, false},
                        Case{"default", PreTokenizerKind::kDefault, true, false}}) {
    Vocab v = byte_level_vocab({"a b"}, {}, c.pre);
    v.finish();
    EXPECT_EQ(v.pre_kind, c.kind) << c.pre;
    EXPECT_EQ(v.clean_spaces, c.clean_spaces) << c.pre;
    EXPECT_EQ(v.ignore_merges, c.ignore_merges) << c.pre;
  }
}

TEST(VocabTest, EndOfTurnMarkersAreFoundByTextAndMadeControl) {
  Vocab v = byte_level_vocab({"a b"}, {{"<|im_end|>", TokenType::kNormal},
                                       {"<|fim_prefix|>", TokenType::kUserDefined},
                                       {"<unused7>", TokenType::kControl},
                                       {"<|file_sep|>", TokenType::kControl}});
  v.eos_id = 256;
  v.finish();
  const TokenId im_end = v.find("<|im_end|>");
  EXPECT_EQ(v.eot_id, im_end);
  EXPECT_EQ(v.attrs[im_end], kAttrNormal | kAttrControl);
  EXPECT_EQ(v.fim_pre_id, v.find("<|fim_prefix|>"));
  EXPECT_EQ(v.attrs[v.fim_pre_id], kAttrUserDefined | kAttrControl);
  EXPECT_EQ(v.attrs[v.find("<unused7>")], kAttrControl | kAttrUnused);
  // EOG: eos, the end-of-turn marker, and the file separator (a FIM token).
  EXPECT_EQ(v.end_of_generation_ids, (std::vector<TokenId>{256, im_end, v.find("<|file_sep|>")}));
  EXPECT_TRUE(v.is_end_of_generation(im_end));
  EXPECT_FALSE(v.is_end_of_generation(v.find("<unused7>")));
}

TEST(VocabTest, FinishingTwiceDerivesTheSame) {
  Vocab v = byte_level_vocab({"a b"}, {{"<|im_end|>", TokenType::kNormal}, {"<|fim_pad|>", TokenType::kNormal}});
  v.finish();
  const Vocab once = v;
  v.finish();
  EXPECT_EQ(v.attrs, once.attrs);
  EXPECT_EQ(v.eot_id, once.eot_id);
  EXPECT_EQ(v.fim_pad_id, once.fim_pad_id);
  EXPECT_EQ(v.end_of_generation_ids, once.end_of_generation_ids);
  EXPECT_TRUE(v.is_control(v.find("<|fim_pad|>")));
}

TEST(VocabTest, ANamedEndOfTurnIsNotReplaced) {
  Vocab v = byte_level_vocab({"a b"}, {{"<|im_end|>", TokenType::kNormal}, {"<|eot_id|>", TokenType::kControl}});
  v.eot_id = static_cast<TokenId>(v.tokens.size() - 1);
  v.finish();
  EXPECT_EQ(v.eot_id, v.find("<|eot_id|>"));
  // <|im_end|> still ends generation (by name), and is a control token for it.
  EXPECT_TRUE(v.is_end_of_generation(v.find("<|im_end|>")));
  EXPECT_TRUE(v.is_control(v.find("<|im_end|>")));
}

}  // namespace
}  // namespace folio
