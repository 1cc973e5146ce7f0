// A forced call in the harmony format (gpt-oss's), against the tiny gpt-oss
// checkpoint's vocabulary, whose harmony markers are control tokens: the
// grammar takes a call after an analysis message or straight away, refuses
// content, another function and arguments off the schema, and whatever it
// lets a random model write is read by HarmonyParser as exactly one call of
// an asked tool with arguments that fit its schema.
#include "server/api/harmony_constraint.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/constraint/constraint_matcher.h"
#include "server/api/harmony_parser.h"
#include "server/api/json_schema_check.h"
#include "tokenizer/tokenizer.h"

namespace folio::server {
namespace {

const char* const kTools = R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
        "additionalProperties": false}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
        "additionalProperties": false}}}]})";

class HarmonyConstraintTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = Tokenizer::create(Vocab::from_hf(std::string(FOLIO_SOURCE_DIR) + "/tests/data/tiny/gpt_oss")).release();
    compiler_ = new ConstraintCompiler(*tokenizer_, tokenizer_->vocab().size());
  }
  static void TearDownTestSuite() {
    delete compiler_;
    delete tokenizer_;
  }

  static ToolRequest tools(const char* choice) {
    Json body = parse_json_object(kTools);
    body["tool_choice"] = parse_json(choice).value();
    return read_tools(body).value();
  }
  static std::shared_ptr<const CompiledConstraint> compile(const ToolRequest& request) {
    const Vocab& vocab = tokenizer_->vocab();
    std::vector<TokenId> control;
    for (TokenId id = 0; id < vocab.size(); ++id)
      if (vocab.is_control(id)) control.push_back(id);
    return compiler_->compile(harmony_call_constraint(request, find_harmony_tokens(vocab).value(), control));
  }
  // Whether the grammar takes `text` (its markers as control tokens) and may end there.
  static bool takes(const std::shared_ptr<const CompiledConstraint>& compiled, const std::string& text) {
    ConstraintMatcher m(compiled);
    for (TokenId id : tokenizer_->encode(text, /*add_special=*/false, /*parse_special=*/true))
      if (!m.accept(id)) return false;
    return m.can_end();
  }
  // What the grammar lets a random model write, markers rendered; "" when it never ends.
  static std::string walk(const std::shared_ptr<const CompiledConstraint>& compiled, unsigned seed) {
    ConstraintMatcher m(compiled);
    std::mt19937 rng(seed);
    std::vector<std::uint32_t> mask(static_cast<std::size_t>(m.mask_words()));
    const Vocab& vocab = tokenizer_->vocab();
    std::string out;
    for (int step = 0; step < 400; ++step) {
      if (m.can_end()) return out;
      m.fill_next_token_mask(mask);
      std::vector<TokenId> allowed;
      for (TokenId id = 0; id < vocab.size(); ++id)
        if ((mask[static_cast<std::size_t>(id) / 32] >> (id % 32)) & 1u) allowed.push_back(id);
      if (allowed.empty()) return "";
      // Lean to the shortest way out: the control tokens and the JSON's closers.
      std::vector<TokenId> closers;
      for (TokenId id : allowed) {
        const std::string piece = tokenizer_->token_to_piece(id, true);
        if (vocab.is_control(id) || (piece.size() <= 2 && std::string_view("\"}0123456789").find(piece[0]) != std::string::npos))
          closers.push_back(id);
      }
      const std::vector<TokenId>& from = !closers.empty() && rng() % 10 < 6 ? closers : allowed;
      const TokenId id = from[rng() % from.size()];
      EXPECT_TRUE(m.accept(id));
      out += tokenizer_->token_to_piece(id, true);
    }
    return "";
  }

  static inline Tokenizer* tokenizer_ = nullptr;
  static inline ConstraintCompiler* compiler_ = nullptr;
};

TEST_F(HarmonyConstraintTest, TakesACallAfterThinkingOrStraightAway) {
  const auto required = compile(tools(R"("required")"));
  const std::string call = "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 2, \"b\": 3}";
  EXPECT_TRUE(takes(required, call));
  EXPECT_TRUE(takes(required, "<|channel|>analysis<|message|>The user wants a sum.<|end|><|start|>assistant" + call));
  EXPECT_TRUE(takes(required,
                    "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}"));
}

TEST_F(HarmonyConstraintTest, RefusesContentAnotherFunctionAndArgumentsOffTheSchema) {
  const auto required = compile(tools(R"("required")"));
  EXPECT_FALSE(takes(required, "<|channel|>final<|message|>It is sunny."));
  EXPECT_FALSE(takes(required, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": \"2\", \"b\": 3}"));
  EXPECT_FALSE(takes(required, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 2}"));
  EXPECT_FALSE(takes(required, "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>hi"));
  const auto add_only = compile(tools(R"({"type": "function", "function": {"name": "add"}})"));
  EXPECT_FALSE(takes(add_only,
                     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}"));
  EXPECT_TRUE(takes(add_only, "<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 2, \"b\": 3}"));
}

TEST_F(HarmonyConstraintTest, WhatARandomModelWritesIsReadAsOneCallThatFitsItsSchema) {
  for (const char* choice : {R"("required")", R"({"type": "function", "function": {"name": "get_weather"}})"}) {
    SCOPED_TRACE(choice);
    const ToolRequest request = tools(choice);
    const auto compiled = compile(request);
    int num_walks = 0;
    for (unsigned seed = 1; seed <= 6; ++seed) {
      const std::string text = walk(compiled, seed);
      if (text.empty()) continue;  // a walk that never ended proves nothing either way
      ++num_walks;
      HarmonyParser parser;
      std::string content, name, arguments;
      int num_calls = 0;
      for (const auto& events : {parser.feed(text), parser.finish()})
        for (const OutputEvent& e : events) {
          if (e.kind == OutputEvent::Kind::kContent) content += e.text;
          if (e.kind == OutputEvent::Kind::kCallStart) ++num_calls, name = e.text;
          if (e.kind == OutputEvent::Kind::kArguments) arguments += e.text;
        }
      EXPECT_EQ(content, "") << text;
      ASSERT_EQ(num_calls, 1) << text;
      if (request.choice == ToolRequest::Choice::kFunction) {
        EXPECT_EQ(name, "get_weather") << text;
      }
      const std::size_t i = name == "add" ? 1 : 0;
      ASSERT_EQ(request.names[i], name) << text;
      const std::optional<Json> args = parse_json(arguments);
      ASSERT_TRUE(args) << arguments << " in " << text;
      EXPECT_TRUE(fits_schema(*args, request.parameters[i])) << arguments << " in " << text;
    }
    EXPECT_GE(num_walks, 3) << "the walks did not end";
  }
}

// The compiler shows xgrammar each control token as a byte no UTF-8 text
// holds, so that a token format can name it: no grammar of text lets one in
// (free text, a structural tag's any_text, takes them, as a model left free
// would write them).
TEST_F(HarmonyConstraintTest, NoGrammarOfTextAllowsAControlToken) {
  const Vocab& vocab = tokenizer_->vocab();
  const std::vector<ConstraintSpec> specs = {
      {ConstraintSpec::Kind::kJsonSchema, R"({"type": "object", "properties": {"note": {"type": "string"}}})", {}},
      {ConstraintSpec::Kind::kJsonSchema,
       R"({"type": "object", "properties": {"note": {"type": "string", "maxLength": 12}}})", {}},
      {ConstraintSpec::Kind::kRegex, ".*", {}}};
  for (const ConstraintSpec& spec : specs) {
    SCOPED_TRACE(spec.text);
    ConstraintMatcher m(compiler_->compile(spec));
    std::vector<std::uint32_t> mask(static_cast<std::size_t>(m.mask_words()));
    // At the start, and inside the string, the regex's text and the thinking.
    const char* const prefix = spec.kind == ConstraintSpec::Kind::kJsonSchema ? "{\"note\": \"a" : "ab";
    for (int at = 0; at < 2; ++at) {
      if (at == 1) {
        for (TokenId id : tokenizer_->encode(prefix, false, false)) {
          ASSERT_TRUE(m.accept(id)) << prefix;
        }
      }
      m.fill_next_token_mask(mask);
      int num_allowed = 0;
      for (TokenId id = 0; id < vocab.size(); ++id) {
        const bool allowed = (mask[static_cast<std::size_t>(id) / 32] >> (id % 32)) & 1u;
        num_allowed += allowed;
        if (vocab.is_control(id) && !vocab.is_end_of_generation(id)) {
          EXPECT_FALSE(allowed) << vocab.tokens[static_cast<std::size_t>(id)];
        }
        // Nor a character JSON keeps out of strings (U+0000-U+001F raw).
        if (at == 1 && spec.kind == ConstraintSpec::Kind::kJsonSchema) {
          const std::string piece = tokenizer_->token_to_piece(id, false);
          if (piece.size() == 1 && static_cast<unsigned char>(piece[0]) < 0x20) {
            EXPECT_FALSE(allowed) << id;
          }
        }
      }
      EXPECT_GT(num_allowed, 0);
    }
  }
}

}  // namespace
}  // namespace folio::server
