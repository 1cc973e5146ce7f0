// Tokenizers read from tokenizer.json (Vocab::from_hf) against the tokenizers
// package on the strings of tests/data/tokenizer/strings.jsonl (goldens from
// scripts/make_hf_tokenizer_goldens.py): ids with and without special tokens
// parsed, and the decoded text, all compared with ==. The tiny models'
// tokenizer.json files are in the tree; the real vocabularies are rebuilt
// from the GGUF files of the models cache exactly as the script built them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/gguf_file.h"
#include "support/test_models.h"
#include "tokenizer/tokenizer.h"

namespace folio {
namespace {

using Json = nlohmann::ordered_json;

struct Golden {
  Json meta;
  std::vector<Json> lines;
};

Golden load_golden(const std::string& name) {
  Golden g;
  std::ifstream in(folio::testing::source_path("tests/data/tokenizer/hf/" + name + ".jsonl"));
  EXPECT_TRUE(in.good()) << "missing golden " << name << "; run scripts/make_hf_tokenizer_goldens.py";
  std::string line;
  while (std::getline(in, line)) {
    Json j = Json::parse(line);
    if (j.contains("meta"))
      g.meta = j["meta"];
    else
      g.lines.push_back(std::move(j));
  }
  return g;
}

// The tokenizer.json the golden script builds from a GGUF file: its vocab and
// merges, control tokens as special added tokens, the golden's normalizer and
// pre-tokenizer.
void write_tokenizer_json(const GgufFile& f, const Json& meta, const std::filesystem::path& dir) {
  const auto& tokens = f.get("tokenizer.ggml.tokens").strings("tokenizer.ggml.tokens");
  const auto& merges = f.get("tokenizer.ggml.merges").strings("tokenizer.ggml.merges");
  const auto types = f.get("tokenizer.ggml.token_type").ints("tokenizer.ggml.token_type");
  Json vocab = Json::object(), added = Json::array();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    vocab[std::string(tokens[i])] = i;
    if (types[i] == 3)
      added.push_back({{"id", i},
                       {"content", std::string(tokens[i])},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
  }
  Json merge_list = Json::array();
  for (auto m : merges) merge_list.push_back(std::string(m));
  Json tok = {{"version", "1.0"},
              {"added_tokens", added},
              {"normalizer", meta["normalizer"]},
              {"pre_tokenizer", meta["pre_tokenizer"]},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}},
              {"model", {{"type", "BPE"}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merge_list}}}};
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tok.dump();
}

class HfTokenizerGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(HfTokenizerGolden, MatchesTheTokenizersPackage) {
  const std::string name = GetParam();
  const Golden g = load_golden(name);
  ASSERT_FALSE(g.lines.empty());
  std::filesystem::path dir;
  std::filesystem::path temp;
  if (g.meta.contains("tokenizer_json")) {
    dir = folio::testing::source_path(g.meta["tokenizer_json"].get<std::string>());
  } else {
    FOLIO_REQUIRE_MODEL(path, g.meta["gguf"].get<std::string>());
    temp = std::filesystem::temp_directory_path() / fmt::format("folio_hf_tok_{}_{}", name, ::getpid());
    write_tokenizer_json(GgufFile::open(path), g.meta, temp);
    dir = temp;
  }
  std::unique_ptr<Tokenizer> tok = Tokenizer::create(Vocab::from_hf(dir.string()));
  if (!temp.empty()) std::filesystem::remove_all(temp);

  int ids_equal = 0, plain_equal = 0, decoded_equal = 0;
  for (const Json& line : g.lines) {
    const std::string text = line["text"].get<std::string>();
    const auto want = line["ids"].get<std::vector<TokenId>>();
    const auto want_plain = line["ids_no_special"].get<std::vector<TokenId>>();
    const auto got = tok->encode(text, /*add_special=*/false, /*parse_special=*/true);
    const auto got_plain = tok->encode(text, /*add_special=*/false, /*parse_special=*/false);
    const std::string decoded = tok->decode(want, /*render_special=*/true);
    ids_equal += got == want;
    plain_equal += got_plain == want_plain;
    decoded_equal += decoded == line["decoded"].get<std::string>();
    EXPECT_EQ(got, want) << Json(text).dump();
    EXPECT_EQ(got_plain, want_plain) << Json(text).dump();
    EXPECT_EQ(decoded, line["decoded"].get<std::string>()) << Json(text).dump();
  }
  std::printf("[%s] %zu strings: ids equal %d, without special tokens %d, decoded text %d\n", name.c_str(),
              g.lines.size(), ids_equal, plain_equal, decoded_equal);
}

INSTANTIATE_TEST_SUITE_P(Goldens, HfTokenizerGolden,
                         ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-gemma3", "smollm2-135m", "qwen2.5-0.5b"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           for (auto& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(HfVocab, ReadsSpecialTokensAndTemplateFromTokenizerConfig) {
  Vocab v = Vocab::from_hf(folio::testing::source_path("tests/data/tiny/llama"), 400);
  EXPECT_EQ(v.size(), 400);  // padded to the model's rows
  EXPECT_EQ(v.tokens[399], "[PAD399]");
  EXPECT_EQ(v.tokens[static_cast<std::size_t>(v.bos_id)], "<|endoftext|>");
  EXPECT_EQ(v.tokens[static_cast<std::size_t>(v.eos_id)], "<|im_end|>");
  EXPECT_TRUE(v.add_bos);
  EXPECT_TRUE(v.is_control(v.eos_id));
  EXPECT_TRUE(v.is_end_of_generation(v.eos_id));
  EXPECT_EQ(v.types[static_cast<std::size_t>(v.find("<think>"))], TokenType::kUserDefined);
  Vocab q = Vocab::from_hf(folio::testing::source_path("tests/data/tiny/qwen2"));
  EXPECT_TRUE(q.normalize_nfc);
  EXPECT_FALSE(q.add_bos);
  EXPECT_EQ(q.bos_id, -1);
}

TEST(HfVocab, RefusesWhatItCannotDo) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("folio_hf_vocab_{}", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string base = folio::testing::source_path("tests/data/tiny/qwen2/tokenizer.json");
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) -> std::string {
    std::ifstream in(base);
    nlohmann::json j = nlohmann::json::parse(in);
    edit(j);
    std::ofstream(dir / "tokenizer.json") << j.dump();
    try {
      Tokenizer::create(Vocab::from_hf(dir.string()));
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(with([](nlohmann::json&) {}), "accepted");
  EXPECT_THAT(with([](nlohmann::json& j) { j["model"]["type"] = "Unigram"; }),
              ::testing::HasSubstr("tokenizer model \"Unigram\" is not supported"));
  EXPECT_THAT(with([](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }),
              ::testing::HasSubstr("byte_fallback"));
  EXPECT_THAT(with([](nlohmann::json& j) {
                j["normalizer"] = {{"type", "NFKC"}};
              }),
              ::testing::HasSubstr("normalizer \"NFKC\" is not supported"));
  EXPECT_THAT(with([](nlohmann::json& j) {
                j["pre_tokenizer"] = {{"type", "Metaspace"}};
              }),
              ::testing::HasSubstr("pre-tokenizer \"Metaspace\" is not supported"));
  EXPECT_THAT(with([](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }),
              ::testing::HasSubstr("Split behaviour \"Removed\" is not supported"));
  EXPECT_THAT(with([](nlohmann::json& j) { j["added_tokens"][0]["lstrip"] = true; }), ::testing::HasSubstr("lstrip"));
  EXPECT_THAT(with([](nlohmann::json& j) { j["model"]["merges"][0] = 7; }),
              ::testing::HasSubstr("is neither \"a b\" nor"));
  EXPECT_THAT(with([](nlohmann::json& j) { j["model"]["merges"][0] = "zzz qqq"; }), ::testing::HasSubstr("zzz"));
  EXPECT_THAT(with([](nlohmann::json& j) { j["added_tokens"][0]["id"] = 5; }), ::testing::HasSubstr("id 5 names both"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace folio
