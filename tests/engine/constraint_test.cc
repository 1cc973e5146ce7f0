// Structured outputs on a real tokenizer (SmolLM2's): the xgrammar wrapper
// compiles schemas, regexes, choices and grammars, refuses bad ones with a
// message, caches by text; a matcher's mask agrees with what it accepts, it
// rolls back exactly, and it ends on an end token. Through the engine, every
// constrained output matches its constraint, ends with finish_reason stop,
// and is the same with speculative decoding (greedy: the same tokens).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <regex>
#include <string>

#include "engine/constraint/constraint_matcher.h"
#include "engine/engine.h"
#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

using Kind = ConstraintSpec::Kind;

class ConstraintTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { session_ = folio::testing::open_test_session(folio::testing::kSmolLM2); }
  static void TearDownTestSuite() { session_.reset(); }
  void SetUp() override {
    if (!session_) {
      FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
    }
  }
  static ConstraintCompiler& compiler() { return *session_->constraints; }
  static std::vector<TokenId> encode(const std::string& text) { return session_->tokenizer->encode(text, false, false); }
  static std::vector<std::uint32_t> mask_of(ConstraintMatcher& m) {
    std::vector<std::uint32_t> words(static_cast<std::size_t>(m.mask_words()));
    m.fill_next_token_mask(words);
    return words;
  }
  // Accepts every token of `text`; false at the first the matcher refuses.
  static bool accepts_text(ConstraintMatcher& m, const std::string& text) {
    for (TokenId t : encode(text)) {
      if (!mask_allows(mask_of(m).data(), t)) return false;
      if (!m.accept(t)) return false;
    }
    return true;
  }
  static TokenId eos() { return session_->tokenizer->vocab().eos_id; }

  static std::shared_ptr<ModelSession> session_;
};

std::shared_ptr<ModelSession> ConstraintTest::session_;

const char* kPersonSchema = R"({"type": "object", "properties": {"name": {"type": "string"},
  "age": {"type": "integer"}}, "required": ["name", "age"]})";

TEST_F(ConstraintTest, ASchemaAcceptsAValidObjectAndEndsOnTheEndToken) {
  ConstraintMatcher m(compiler().compile({Kind::kJsonSchema, kPersonSchema, {}}));
  EXPECT_EQ(m.mask_words(), (session_->config().vocab_size + 31) / 32);
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(accepts_text(m, R"({"name": "Ada", "age": 36})"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.is_terminated());
  const std::vector<std::uint32_t> mask = mask_of(m);
  EXPECT_TRUE(mask_allows(mask.data(), eos()));
  EXPECT_TRUE(m.accept(eos()));
  EXPECT_TRUE(m.is_terminated());
}

TEST_F(ConstraintTest, ASchemaRefusesWhatBreaksIt) {
  auto compiled = compiler().compile({Kind::kJsonSchema, kPersonSchema, {}});
  {
    ConstraintMatcher m(compiled);
    EXPECT_FALSE(accepts_text(m, R"({"name": 5)"));
  }
  {
    ConstraintMatcher m(compiled);
    EXPECT_FALSE(accepts_text(m, R"([1, 2])"));
  }
  {
    // Before the object is whole, no end token.
    ConstraintMatcher m(compiled);
    ASSERT_TRUE(accepts_text(m, R"({"name": "Ada")"));
    EXPECT_FALSE(mask_allows(mask_of(m).data(), eos()));
    EXPECT_FALSE(m.accept(eos()));
  }
}

// Every token the mask allows is one accept() takes, and every token it
// forbids is refused (every allowed one, and a seventh of the vocabulary,
// at a few states).
TEST_F(ConstraintTest, TheMaskAgreesWithAccept) {
  ConstraintMatcher m(compiler().compile({Kind::kJsonSchema, kPersonSchema, {}}));
  for (const std::string& prefix : {std::string(""), std::string(R"({"name": "A)"), std::string(R"(", "age": 1)")}) {
    ASSERT_TRUE(accepts_text(m, prefix));
    const std::vector<std::uint32_t> mask = mask_of(m);
    int allowed = 0;
    // Every allowed token, and every 7th token whatever the mask says.
    for (TokenId t = 0; t < session_->config().vocab_size; ++t) {
      if (t % 7 != 0 && !mask_allows(mask.data(), t)) continue;
      const bool ok = m.accept(t);
      EXPECT_EQ(ok, mask_allows(mask.data(), t)) << "token " << t << " after '" << prefix << "'";
      if (ok) {
        ++allowed;
        m.rollback(1);
      }
    }
    EXPECT_GT(allowed, 0) << prefix;
    EXPECT_EQ(mask_of(m), mask) << "rollbacks left the matcher where it was";
  }
}

TEST_F(ConstraintTest, RollbackUndoesAcceptedTokens) {
  ConstraintMatcher m(compiler().compile({Kind::kJsonSchema, kPersonSchema, {}}));
  const std::vector<std::uint32_t> start = mask_of(m);
  const std::vector<TokenId> tokens = encode(R"({"name": "Bob")");
  ASSERT_GE(tokens.size(), 3u);
  for (TokenId t : tokens) ASSERT_TRUE(m.accept(t));
  const std::vector<std::uint32_t> after = mask_of(m);
  EXPECT_NE(after, start);
  m.rollback(static_cast<int>(tokens.size()));
  EXPECT_EQ(mask_of(m), start);
  for (TokenId t : tokens) ASSERT_TRUE(m.accept(t));
  EXPECT_EQ(mask_of(m), after);
}

TEST_F(ConstraintTest, RegexChoiceGrammarAndAnyJson) {
  {
    ConstraintMatcher m(compiler().compile({Kind::kRegex, "[0-9]{3}-[a-z]+", {}}));
    EXPECT_TRUE(accepts_text(m, "123-abc"));
    EXPECT_TRUE(m.can_end());
    ConstraintMatcher n(compiler().compile({Kind::kRegex, "[0-9]{3}-[a-z]+", {}}));
    EXPECT_FALSE(accepts_text(n, "12a"));
  }
  {
    auto c = compiler().compile({Kind::kChoice, "", {"yes", "no", "say \"maybe\""}});
    ConstraintMatcher m(c);
    EXPECT_TRUE(accepts_text(m, "no"));
    EXPECT_TRUE(m.can_end());
    ConstraintMatcher q(c);
    EXPECT_TRUE(accepts_text(q, "say \"maybe\""));
    ConstraintMatcher n(c);
    EXPECT_FALSE(accepts_text(n, "nope"));
  }
  {
    ConstraintMatcher m(compiler().compile({Kind::kGrammar, R"G(root ::= "(" [a-c]* ")")G", {}}));
    EXPECT_TRUE(accepts_text(m, "(abcab)"));
    EXPECT_TRUE(m.can_end());
  }
  {
    auto c = compiler().compile({Kind::kJsonObject, "", {}});
    ConstraintMatcher m(c);
    EXPECT_TRUE(accepts_text(m, R"({"anything": [1, {"x": null}]})"));
    ConstraintMatcher n(c);
    EXPECT_FALSE(accepts_text(n, "hello"));
    // An object, as JSON mode promises: never an array, a string or null.
    for (const char* other : {"[1]", "[null]", "null", "\"text\"", "3"}) {
      ConstraintMatcher o(c);
      EXPECT_FALSE(accepts_text(o, other) && o.can_end()) << other;
    }
  }
}

TEST_F(ConstraintTest, WhatCannotBeCompiledIsAnErrorThatNamesIt) {
  auto message = [](const ConstraintSpec& spec) -> std::string {
    try {
      compiler().compile(spec);
    } catch (const ConstraintError& e) {
      return e.what();
    }
    return "";
  };
  const std::string bad_json = message({Kind::kJsonSchema, R"({"type": "object", )", {}});
  EXPECT_NE(bad_json.find("json_schema"), std::string::npos) << bad_json;
  const std::string bad_ref = message({Kind::kJsonSchema, R"({"$ref": "#/$defs/Missing"})", {}});
  EXPECT_NE(bad_ref.find("Missing"), std::string::npos) << bad_ref;
  const std::string bad_regex = message({Kind::kRegex, "(ab", {}});
  EXPECT_NE(bad_regex.find("regex"), std::string::npos) << bad_regex;
  const std::string bad_grammar = message({Kind::kGrammar, "root ::= undefined_rule", {}});
  EXPECT_NE(bad_grammar.find("undefined_rule"), std::string::npos) << bad_grammar;
  EXPECT_NE(message({Kind::kChoice, "", {}}), "");
  // And the compiler still works afterwards.
  EXPECT_NO_THROW(compiler().compile({Kind::kRegex, "a+", {}}));
}

TEST_F(ConstraintTest, CompiledConstraintsAreCachedByText) {
  const std::int64_t hits = compiler().cache_hits();
  auto a = compiler().compile({Kind::kJsonSchema, R"({"type": "array", "items": {"type": "boolean"}})", {}});
  auto b = compiler().compile({Kind::kJsonSchema, R"({"type": "array", "items": {"type": "boolean"}})", {}});
  auto c = compiler().compile({Kind::kJsonObject, R"({"type": "array", "items": {"type": "boolean"}})", {}});
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(compiler().cache_hits(), hits + 1);
}

struct Generated {
  std::vector<TokenId> tokens;
  std::string text;
  std::string finish;
  std::string error;
};

Generated collect(RequestStream& stream) {
  Generated g;
  while (auto out = stream.next()) {
    if (!out->error.empty()) g.error = out->error;
    for (auto& d : out->deltas) {
      g.tokens.insert(g.tokens.end(), d.token_ids.begin(), d.token_ids.end());
      g.text += d.text;
      if (d.finish_reason) g.finish = finish_reason_name(*d.finish_reason);
    }
    if (out->finished) break;
  }
  return g;
}

EngineConfig engine_config() {
  EngineConfig c;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 16;
  c.max_model_len = 512;
  c.kv_num_blocks = 256;
  return c;
}

// Constrained requests, greedy and sampled, on one engine: each output
// matches its constraint and ends with stop.
std::vector<Generated> run_constrained(const std::shared_ptr<ModelSession>& session, const EngineConfig& c) {
  ConstraintCompiler& cc = *session->constraints;
  struct Case {
    ConstraintSpec spec;
    std::string prompt;
  };
  const std::vector<Case> cases = {
      {{Kind::kJsonSchema, kPersonSchema, {}}, "A person as JSON: "},
      {{Kind::kRegex, "(0|[1-9][0-9]{0,3})-(red|green|blue)", {}}, "A number and a colour: "},
      {{Kind::kChoice, "", {"Paris", "London", "Berlin"}}, "The capital of France is"},
      {{Kind::kJsonObject, "", {}}, "Some JSON about cats: "},
  };
  Engine engine(session, c);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 8; ++i) {
    const Case& k = cases[static_cast<std::size_t>(i % 4)];
    EngineRequest r;
    r.prompt = session->tokenizer->encode(k.prompt, true, false);
    r.params.constraint = cc.compile(k.spec);
    r.params.max_tokens = 200;
    r.params.temperature = i < 4 ? 0.0f : 0.8f;
    r.params.seed = i;
    if (i % 3 == 0) r.params.logprobs = 2;
    streams.push_back(engine.submit(r));
  }
  std::vector<Generated> out;
  for (auto& s : streams) out.push_back(collect(*s));
  return out;
}

void expect_valid(const std::vector<Generated>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Generated& g = outputs[i];
    EXPECT_EQ(g.error, "") << i;
    EXPECT_EQ(g.finish, "stop") << i << ": " << g.text;
    switch (i % 4) {
      case 0: {
        const auto j = nlohmann::json::parse(g.text, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << g.text;
        EXPECT_TRUE(j.is_object() && j.contains("name") && j["name"].is_string() && j.contains("age") &&
                    j["age"].is_number_integer())
            << g.text;
        break;
      }
      case 1: EXPECT_TRUE(std::regex_match(g.text, std::regex("(0|[1-9][0-9]{0,3})-(red|green|blue)"))) << g.text; break;
      case 2: EXPECT_TRUE(g.text == "Paris" || g.text == "London" || g.text == "Berlin") << g.text; break;
      case 3: {
        const auto j = nlohmann::json::parse(g.text, nullptr, false);
        EXPECT_TRUE(!j.is_discarded() && j.is_object()) << g.text;
        break;
      }
    }
  }
}

TEST_F(ConstraintTest, EngineOutputsMatchTheirConstraints) {
  const auto plain = run_constrained(session_, engine_config());
  expect_valid(plain);
  EXPECT_EQ(plain[2].text, "Paris");
}

// Speculative decoding stays exact under a constraint: drafts are checked
// against each row's mask, and greedy requests give the same tokens.
TEST_F(ConstraintTest, SpeculationAndHostSamplingGiveTheSameConstrainedTokens) {
  const auto plain = run_constrained(session_, engine_config());
  EngineConfig spec = engine_config();
  spec.speculative.method = SpeculativeConfig::Method::kNgram;
  spec.speculative.adaptive = false;  // every step proposes: the mechanism under test
  spec.speculative.num_tokens = 4;
  const auto speculated = run_constrained(session_, spec);
  expect_valid(speculated);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(speculated[i].tokens, plain[i].tokens) << "greedy request " << i;
  EngineConfig draft = spec;
  draft.speculative.method = SpeculativeConfig::Method::kDraft;
  draft.speculative.adaptive = false;  // every step proposes: the mechanism under test
  draft.speculative.num_tokens = 3;
  draft.speculative.draft_model_path = folio::testing::model_path(folio::testing::kSmolLM2);
  const auto drafted = run_constrained(session_, draft);
  expect_valid(drafted);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(drafted[i].tokens, plain[i].tokens) << "greedy request " << i;
  // The host reference path gives the device's tokens, sampled ones too.
  for (EngineConfig c : {engine_config(), spec, draft}) {
    const auto device = run_constrained(session_, c);
    c.host_sampling = true;
    const auto host = run_constrained(session_, c);
    for (std::size_t i = 0; i < device.size(); ++i) EXPECT_EQ(host[i].tokens, device[i].tokens) << "request " << i;
  }
}

}  // namespace
}  // namespace folio
