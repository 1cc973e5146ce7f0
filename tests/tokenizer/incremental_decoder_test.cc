// IncrementalDecoder: streamed text equals the whole decode, and no chunk ever
// holds part of a UTF-8 character, on real models (emoji and CJK split across
// byte tokens) and on hand-built byte sequences.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "model/gguf_file.h"
#include "support/test_models.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/test_vocabs.h"

namespace folio {
namespace {

using Ids = std::vector<TokenId>;

std::vector<std::string> golden_strings() {
  std::ifstream in(testing::source_path("tests/data/tokenizer/strings.jsonl"));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.is_string()) out.push_back(j.get<std::string>());
  }
  return out;
}

// Streams `ids`; checks every chunk and returns the whole streamed text.
std::string stream(IncrementalDecoder& decoder, const Ids& ids, int* held_back = nullptr) {
  std::string out;
  for (TokenId id : ids) {
    const std::string chunk = decoder.push(id);
    EXPECT_TRUE(utf8::is_valid(chunk));
    if (held_back != nullptr && decoder.num_pending_bytes() > 0) ++*held_back;
    out += chunk;
  }
  const std::string rest = decoder.flush();
  EXPECT_TRUE(utf8::is_valid(rest));
  return out + rest;
}

class IncrementalDecoderModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(IncrementalDecoderModelTest, StreamEqualsWholeDecode) {
  FOLIO_REQUIRE_MODEL(path, GetParam());
  GgufFile file = GgufFile::open(path);
  auto tokenizer = Tokenizer::create(Vocab::from_gguf(file));
  int held_back = 0;
  for (const std::string& text : golden_strings()) {
    const Ids ids = tokenizer->encode(text, true, true);
    for (bool render : {false, true}) {
      IncrementalDecoder decoder(*tokenizer, render);
      EXPECT_EQ(stream(decoder, ids, &held_back), utf8::replace_invalid(tokenizer->decode(ids, render)))
          << nlohmann::json(text).dump();
    }
  }
  // Multi-byte characters did arrive split across tokens.
  EXPECT_GT(held_back, 20);
}

TEST_P(IncrementalDecoderModelTest, EmojiArrivesWhole) {
  FOLIO_REQUIRE_MODEL(path, GetParam());
  GgufFile file = GgufFile::open(path);
  auto tokenizer = Tokenizer::create(Vocab::from_gguf(file));
  const std::string text = "家族👨‍👩‍👧‍👦 and 🫨";
  const Ids ids = tokenizer->encode(text, false, false);
  IncrementalDecoder decoder(*tokenizer, false);
  std::vector<std::string> chunks;
  for (TokenId id : ids) chunks.push_back(decoder.push(id));
  chunks.push_back(decoder.flush());
  std::string joined;
  for (const std::string& c : chunks) joined += c;
  EXPECT_EQ(joined, text);
  EXPECT_GT(ids.size(), 10u);
}

INSTANTIATE_TEST_SUITE_P(Models, IncrementalDecoderModelTest,
                         ::testing::Values(testing::kSmolLM2, testing::kQwen05B, testing::kGemma3));

// Byte tokens of a SentencePiece vocab: ids 3 + byte.
TokenId byte_token(unsigned char b) { return 3 + b; }

class IncrementalDecoderBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Vocab v = testing::sentence_piece_vocab({{"a", -1}});
    v.add_space_prefix = false;
    tokenizer_ = Tokenizer::create(v);
  }
  Ids bytes(std::string_view s) {
    Ids ids;
    for (char c : s) ids.push_back(byte_token(static_cast<unsigned char>(c)));
    return ids;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(IncrementalDecoderBytesTest, HoldsBackIncompleteCharacters) {
  IncrementalDecoder decoder(*tokenizer_, false);
  EXPECT_EQ(decoder.push(byte_token(0xF0)), "");
  EXPECT_EQ(decoder.push(byte_token(0x9F)), "");
  EXPECT_EQ(decoder.push(byte_token(0x98)), "");
  EXPECT_EQ(decoder.num_pending_bytes(), 3u);
  EXPECT_EQ(decoder.push(byte_token(0x80)), "\xF0\x9F\x98\x80");
  EXPECT_EQ(decoder.flush(), "");
}

TEST_F(IncrementalDecoderBytesTest, InvalidBytesBecomeReplacementCharacters) {
  IncrementalDecoder decoder(*tokenizer_, false);
  // A byte that can never start a character is replaced at once.
  EXPECT_EQ(decoder.push(byte_token(0xFF)), "\xEF\xBF\xBD");
  // A started character cut short is replaced when that becomes certain...
  EXPECT_EQ(decoder.push(byte_token(0xE2)), "");
  EXPECT_EQ(decoder.push(byte_token(0x82)), "");
  EXPECT_EQ(decoder.push(tokenizer_->vocab().find("a")), "\xEF\xBF\xBD" "a");
  // ...or at the end of the stream.
  EXPECT_EQ(decoder.push(byte_token(0xE2)), "");
  EXPECT_EQ(decoder.flush(), "\xEF\xBF\xBD");
}

TEST_F(IncrementalDecoderBytesTest, RandomByteStreamsEqualWholeDecode) {
  std::mt19937 rng(7);
  const std::string alphabet = "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80\xED\xA0\x80\xFF\xC0\xF4\x90";
  for (int round = 0; round < 500; ++round) {
    std::string s;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
    const Ids ids = bytes(s);
    IncrementalDecoder decoder(*tokenizer_, false);
    std::string hex;
    for (unsigned char c : s) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
    EXPECT_EQ(stream(decoder, ids), utf8::replace_invalid(s)) << hex;
  }
}

}  // namespace
}  // namespace folio
