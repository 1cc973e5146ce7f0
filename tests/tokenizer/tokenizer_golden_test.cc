// Goldens from llama.cpp (scripts/make_tokenizer_goldens.py): for every string
// of tests/data/tokenizer/strings.jsonl, folio's token ids, detokenized text and
// vocab facts must equal the reference's exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "model/gguf_file.h"
#include "support/test_models.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace folio {
namespace {

using nlohmann::json;

struct GoldenModel {
  const char* test_name;
  const char* golden;  // tests/data/tokenizer/<golden>.jsonl
  const char* file;    // in the models cache
  const char* pre;     // tokenizer.ggml.pre override, or nullptr
};

const GoldenModel kModels[] = {
    {"smollm2_135m", "smollm2-135m", testing::kSmolLM2, nullptr},
    {"qwen2_5_0_5b", "qwen2.5-0.5b", testing::kQwen05B, nullptr},
    // Qwen2.5 1.5B has the same tokenizer as 0.5B: the same goldens hold.
    {"qwen2_5_1_5b", "qwen2.5-0.5b", testing::kQwen15B, nullptr},
    {"gemma_3_270m", "gemma-3-270m", testing::kGemma3, nullptr},
    // Qwen2.5's vocab under other pre-tokenizers, to check those families.
    {"pre_llama_bpe", "qwen2.5-0.5b-pre-llama-bpe", testing::kQwen05B, "llama-bpe"},
    {"pre_gpt_2", "qwen2.5-0.5b-pre-gpt-2", testing::kQwen05B, "gpt-2"},
    {"pre_default", "qwen2.5-0.5b-pre-default", testing::kQwen05B, "default"},
};

void PrintTo(const GoldenModel& m, std::ostream* os) { *os << m.golden; }

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// A golden text: a JSON string, or {"hex": ...} for bytes that are not UTF-8.
std::string golden_text(const json& j) { return j.is_string() ? j.get<std::string>() : from_hex(j.at("hex")); }

struct Golden {
  json meta;
  std::vector<json> cases;
};

Golden read_golden(const std::string& name) {
  std::ifstream in(testing::source_path("tests/data/tokenizer/" + name + ".jsonl"));
  EXPECT_TRUE(in.good()) << "missing golden " << name << "; run scripts/make_tokenizer_goldens.py";
  Golden g;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line);
    if (j.contains("meta")) {
      g.meta = j["meta"];
    } else {
      g.cases.push_back(std::move(j));
    }
  }
  return g;
}

// Each tokenizer is built once for all the tests that use it.
const Tokenizer& load(const std::string& path, const char* pre) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::unique_ptr<Tokenizer>& t = cache[path + "|" + (pre ? pre : "")];
  if (!t) {
    GgufFile file = GgufFile::open(path);
    Vocab vocab = Vocab::from_gguf(file);
    if (pre != nullptr) {
      vocab.pre = pre;
      vocab.finish(path);
    }
    t = Tokenizer::create(std::move(vocab));
  }
  return *t;
}

const Golden& golden_for(const std::string& name) {
  static std::map<std::string, Golden> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, read_golden(name)).first;
  return it->second;
}

std::string show(const std::vector<TokenId>& ids) {
  std::string s = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

class TokenizerGoldenTest : public ::testing::TestWithParam<GoldenModel> {};

TEST_P(TokenizerGoldenTest, IdsAndTextEqualLlamaCpp) {
  const GoldenModel& m = GetParam();
  FOLIO_REQUIRE_MODEL(path, m.file);
  const Golden& golden = golden_for(m.golden);
  ASSERT_GE(golden.cases.size(), 400u);
  const Tokenizer* tokenizer = &load(path, m.pre);

  int id_mismatches = 0, text_mismatches = 0, roundtrips = 0;
  for (const json& c : golden.cases) {
    const std::string text = golden_text(c.at("text"));
    const bool parse_special = c.at("parse_special");
    const auto want = c.at("ids").get<std::vector<TokenId>>();
    const std::vector<TokenId> got = tokenizer->encode(text, true, parse_special);
    if (got != want && ++id_mismatches <= 10)
      ADD_FAILURE() << m.golden << " parse_special=" << parse_special << " text=" << c.at("text").dump()
                    << "\n  want " << show(want) << "\n  got  " << show(got);

    // Decoding the reference's ids gives the reference's text, byte for byte.
    for (bool render : {false, true}) {
      const std::string want_text = golden_text(c.at(render ? "detok_special" : "detok"));
      const std::string got_text = tokenizer->decode(want, render);
      if (got_text != want_text && ++text_mismatches <= 10)
        ADD_FAILURE() << m.golden << " decode(render_special=" << render << ") of " << show(want) << "\n  want "
                      << json(utf8::replace_invalid(want_text)).dump() << "\n  got  "
                      << json(utf8::replace_invalid(got_text)).dump();
    }
    // Where llama.cpp gives the text back, so does folio.
    if (c.at("roundtrip").get<bool>()) {
      std::vector<TokenId> body = got;
      if (tokenizer->vocab().add_bos && !body.empty() && body[0] == tokenizer->vocab().bos_id) body.erase(body.begin());
      EXPECT_EQ(tokenizer->decode(body, parse_special), text) << m.golden << " round trip of " << c.at("text").dump();
      ++roundtrips;
    }
  }
  EXPECT_EQ(id_mismatches, 0) << m.golden << ": " << id_mismatches << " of " << golden.cases.size()
                              << " cases give other ids than llama.cpp";
  EXPECT_EQ(text_mismatches, 0) << m.golden << ": " << text_mismatches << " decodes differ from llama.cpp";
  EXPECT_GT(roundtrips, 300) << m.golden;
}

TEST_P(TokenizerGoldenTest, VocabFactsEqualLlamaCpp) {
  const GoldenModel& m = GetParam();
  FOLIO_REQUIRE_MODEL(path, m.file);
  const Golden& golden = golden_for(m.golden);
  const Tokenizer* tokenizer = &load(path, m.pre);
  const Vocab& vocab = tokenizer->vocab();
  const json& meta = golden.meta;

  ASSERT_EQ(vocab.size(), meta.at("n_vocab").get<std::int64_t>());
  EXPECT_EQ(vocab.bos_id, meta.at("bos").get<TokenId>());
  EXPECT_EQ(vocab.eos_id, meta.at("eos").get<TokenId>());
  EXPECT_EQ(vocab.eot_id, meta.at("eot").get<TokenId>());
  EXPECT_EQ(vocab.add_bos, meta.at("add_bos").get<bool>());
  EXPECT_EQ(vocab.add_eos, meta.at("add_eos").get<bool>());
  EXPECT_EQ(vocab.end_of_generation_ids, meta.at("eog").get<std::vector<TokenId>>());

  const json& attrs = meta.at("attrs");
  int attr_mismatches = 0;
  for (TokenId id = 0; id < vocab.size(); ++id) {
    const std::string key = std::to_string(id);
    const TokenAttrs want = attrs.contains(key) ? attrs[key].get<TokenAttrs>() : kAttrNormal;
    if (vocab.attrs[id] != want && ++attr_mismatches <= 10)
      ADD_FAILURE() << "token " << id << " " << json(vocab.tokens[id]).dump() << " attrs " << vocab.attrs[id]
                    << ", llama.cpp " << want;
  }
  EXPECT_EQ(attr_mismatches, 0);

  for (const json& p : meta.at("pieces")) {
    const TokenId id = p[0];
    EXPECT_EQ(tokenizer->token_to_piece(id, false), golden_text(p[1])) << "token " << id;
    EXPECT_EQ(tokenizer->token_to_piece(id, true), golden_text(p[2])) << "token " << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizerGoldenTest, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<GoldenModel>& param_info) {
                           return std::string(param_info.param.test_name);
                         });

}  // namespace
}  // namespace folio
