// The grammar that forces a tool call, for every family's format: it
// compiles against a real vocabulary (Qwen2.5's, 151k tokens), it takes the
// family's own spelling of a call, and whatever it lets a model write parses
// back into calls of the asked tools whose arguments fit their schemas. The
// "model" here picks allowed tokens at random (a seeded walk that leans to
// tokens that close strings and objects), which is what a forced call of a
// random-weight checkpoint writes.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/constraint/constraint_compiler.h"
#include "engine/constraint/constraint_matcher.h"
#include "model/gguf_file.h"
#include "server/api/json_schema_check.h"
#include "server/api/tool_call_parser.h"
#include "support/test_models.h"
#include "tokenizer/tokenizer.h"

namespace folio::server {
namespace {

constexpr ToolFormat kFormats[] = {ToolFormat::kHermes,      ToolFormat::kQwenXml, ToolFormat::kMistral,
                                   ToolFormat::kMistralArgs, ToolFormat::kLlama3,  ToolFormat::kPythonic,
                                   ToolFormat::kGranite,     ToolFormat::kPhi4Mini, ToolFormat::kGlm4,
                                   ToolFormat::kGeneric};

const char* const kTools = R"({"tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                       "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "number"}, "exact": {"type": "boolean"},
                       "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
        "required": ["a", "b"], "additionalProperties": false}}}]})";

class ToolGrammarTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = testing::model_path(testing::kQwen05B);
    if (path.empty()) return;
    GgufFile gguf = GgufFile::open(path);
    tokenizer_ = Tokenizer::create(Vocab::from_gguf(gguf)).release();
    compiler_ = new ConstraintCompiler(*tokenizer_, static_cast<std::int64_t>(tokenizer_->vocab().size()));
    // Tokens that end something: a random walk that leans to them ends.
    for (TokenId id = 0; id < static_cast<TokenId>(tokenizer_->vocab().size()); ++id) {
      const std::string piece = tokenizer_->token_to_piece(id, false);
      if (!piece.empty() && piece.size() <= 3 && std::string_view("\"}])>\n,<0123456789").find(piece[0]) != std::string::npos)
        closers_->push_back(id);
    }
  }
  static void TearDownTestSuite() {
    delete compiler_;
    delete tokenizer_;
    compiler_ = nullptr;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    FOLIO_REQUIRE_MODEL(path, testing::kQwen05B);
    ASSERT_NE(compiler_, nullptr);
  }

  static ToolRequest tools(const char* choice) {
    Json body = parse_json_object(kTools);
    body["tool_choice"] = parse_json(choice).value();
    return read_tools(body).value();
  }

  // What the grammar lets a random model write; "" when it never ends.
  static std::string walk(const std::shared_ptr<const CompiledConstraint>& compiled, unsigned seed) {
    ConstraintMatcher m(compiled);
    std::mt19937 rng(seed);
    std::vector<std::uint32_t> mask(static_cast<std::size_t>(m.mask_words()));
    auto allowed = [&](TokenId id) { return (mask[static_cast<std::size_t>(id) / 32] >> (id % 32)) & 1u; };
    std::string out;
    for (int step = 0; step < 600; ++step) {
      if (m.can_end() && (m.is_terminated() || rng() % 2 == 0)) return out;
      m.fill_next_token_mask(mask);
      std::vector<TokenId> choices;
      if (rng() % 10 < 7)
        for (TokenId id : *closers_)
          if (allowed(id)) choices.push_back(id);
      for (int tries = 0; choices.empty() && tries < 20000; ++tries) {
        const TokenId id = static_cast<TokenId>(rng() % tokenizer_->vocab().size());
        if (allowed(id)) choices.push_back(id);
      }
      for (TokenId id = 0; choices.empty() && id < static_cast<TokenId>(tokenizer_->vocab().size()); ++id)
        if (allowed(id) && !tokenizer_->vocab().is_end_of_generation(id)) choices.push_back(id);
      if (choices.empty()) return m.can_end() ? out : "";
      const TokenId id = choices[rng() % choices.size()];
      if (tokenizer_->vocab().is_end_of_generation(id)) return out;
      EXPECT_TRUE(m.accept(id));
      out += tokenizer_->token_to_piece(id, false);
    }
    return "";
  }

  // Whether the grammar takes `text` (any tokenization of it) and may end there.
  static bool takes(const std::shared_ptr<const CompiledConstraint>& compiled, const std::string& text) {
    ConstraintMatcher m(compiled);
    for (TokenId id : tokenizer_->encode(text, /*add_special=*/false, /*parse_special=*/false))
      if (!m.accept(id)) return false;
    return m.can_end();
  }

  static inline Tokenizer* tokenizer_ = nullptr;
  static inline ConstraintCompiler* compiler_ = nullptr;
  static inline std::vector<TokenId>* closers_ = new std::vector<TokenId>();
};

// Calls read from `text` as the server reads a forced answer.
std::vector<ToolCallText> calls_in(ToolFormat format, const ToolRequest& tools, const std::string& text,
                                   std::string& content) {
  ToolCallParser parser(format, &tools);
  std::vector<ToolCallText> calls;
  for (auto events : {parser.feed(text), parser.finish()})
    for (const OutputEvent& e : events) {
      if (e.kind == OutputEvent::Kind::kContent) content += e.text;
      if (e.kind == OutputEvent::Kind::kCallStart) calls.push_back({e.text, "", e.id});
      if (e.kind == OutputEvent::Kind::kArguments) calls.back().arguments += e.text;
    }
  return calls;
}

TEST_F(ToolGrammarTest, EachFormatsForcedCallCompilesAndWhatItWritesParses) {
  for (ToolFormat format : kFormats) {
    for (const char* choice : {R"("required")", R"({"type": "function", "function": {"name": "add"}})"}) {
      SCOPED_TRACE(std::string(tool_format_name(format)) + " " + choice);
      const ToolRequest request = tools(choice);
      const std::optional<ConstraintSpec> spec = tool_constraint(request, format);
      ASSERT_TRUE(spec);
      std::shared_ptr<const CompiledConstraint> compiled;
      ASSERT_NO_THROW(compiled = compiler_->compile(*spec)) << spec->text;
      int num_walks = 0;
      for (unsigned seed = 1; seed <= 6; ++seed) {
        const std::string text = walk(compiled, seed);
        if (text.empty()) continue;  // a walk that never ended proves nothing either way
        ++num_walks;
        std::string content;
        const std::vector<ToolCallText> calls = calls_in(format, request, text, content);
        EXPECT_EQ(content.find_first_not_of(" \n"), std::string::npos) << "content " << content << " of " << text;
        ASSERT_FALSE(calls.empty()) << text;
        for (const ToolCallText& c : calls) {
          if (request.choice == ToolRequest::Choice::kFunction) {
            EXPECT_EQ(c.name, "add") << text;
          }
          const Json* schema = nullptr;
          for (std::size_t i = 0; i < request.names.size(); ++i)
            if (request.names[i] == c.name) schema = &request.parameters[i];
          ASSERT_NE(schema, nullptr) << c.name << " in " << text;
          const std::optional<Json> args = parse_json(c.arguments);
          ASSERT_TRUE(args) << c.arguments << " in " << text;
          EXPECT_TRUE(fits_schema(*args, *schema)) << c.arguments << " in " << text;
        }
      }
      EXPECT_GE(num_walks, 3) << "the walks did not end";
    }
  }
}

TEST_F(ToolGrammarTest, EachFormatsGrammarTakesTheFamilysOwnSpelling) {
  const ToolRequest request = tools(R"("required")");
  const std::vector<std::pair<ToolFormat, std::string>> spellings = {
      {ToolFormat::kHermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>"},
      {ToolFormat::kQwenXml,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"},
      {ToolFormat::kMistral, "[{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}]"},
      {ToolFormat::kMistralArgs, "get_weather[ARGS]{\"city\": \"Paris\"}"},
      {ToolFormat::kLlama3, "{\"name\": \"add\", \"parameters\": {\"a\": 2, \"b\": 3}}"},
      {ToolFormat::kPythonic, "[get_weather(city=\"Paris\", days=3), add(a=2, b=3.5, tags=[\"x\"])]"},
      {ToolFormat::kGranite, "[{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}]"},
      {ToolFormat::kPhi4Mini, "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]"},
      {ToolFormat::kGlm4, "get_weather\n{\"city\": \"Paris\"}"},
  };
  for (const auto& [format, text] : spellings) {
    SCOPED_TRACE(tool_format_name(format));
    const std::shared_ptr<const CompiledConstraint> compiled = compiler_->compile(*tool_constraint(request, format));
    EXPECT_TRUE(takes(compiled, text)) << text;
    std::string content;
    EXPECT_FALSE(calls_in(format, request, text, content).empty()) << text;
    EXPECT_EQ(content, "");
  }
  // A Python-style call without a required argument, or with one of the wrong type, is refused.
  const auto pythonic = compiler_->compile(*tool_constraint(request, ToolFormat::kPythonic));
  EXPECT_FALSE(takes(pythonic, "[get_weather(days=3)]"));
  EXPECT_FALSE(takes(pythonic, "[add(a=\"2\", b=3)]"));
  EXPECT_FALSE(takes(pythonic, "[get_weather(city=\"Paris\", unit=\"kelvin\")]"));
}

TEST_F(ToolGrammarTest, AForcedCallComesAfterTheThinkingWhichStaysFree) {
  const ToolRequest request = tools(R"("required")");
  const std::string call = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>";
  // The prompt opened <think> (DeepSeek-R1's, GLM-Z1's templates): the model ends it, then calls.
  const auto open = compiler_->compile(*tool_constraint(request, ToolFormat::kHermes, Thinking::kOpen));
  EXPECT_TRUE(takes(open, "The user wants a sum; <tool_call> comes next.</think>\n\n" + call));
  EXPECT_FALSE(takes(open, call));
  EXPECT_FALSE(takes(open, "Thinking.</think>\n\nThe answer is 5."));
  // A template that thinks: the model may think first, or call at once.
  const auto may = compiler_->compile(*tool_constraint(request, ToolFormat::kHermes, Thinking::kMayOpen));
  EXPECT_TRUE(takes(may, "<think>\nA sum.\n</think>\n\n" + call));
  EXPECT_TRUE(takes(may, call));
  EXPECT_FALSE(takes(may, "Just text."));
  // What the reasoning parser gives the tool parser is the call.
  const auto glm = compiler_->compile(*tool_constraint(request, ToolFormat::kGlm4, Thinking::kOpen));
  EXPECT_TRUE(takes(glm, "Let me pick.</think>add\n{\"a\": 2, \"b\": 3}"));
}

TEST_F(ToolGrammarTest, AutoConstrainsACallFromItsTagWhereTheTagIsText) {
  const ToolRequest request = tools(R"("auto")");
  for (ToolFormat format : kFormats) {
    const std::optional<ConstraintSpec> spec = tool_constraint(request, format);
    const bool tagged =
        format == ToolFormat::kHermes || format == ToolFormat::kGeneric || format == ToolFormat::kQwenXml;
    EXPECT_EQ(spec.has_value(), tagged) << tool_format_name(format);
    if (!spec) continue;
    const auto compiled = compiler_->compile(*spec);
    EXPECT_TRUE(takes(compiled, "Let me look that up."));
    const std::string call = format == ToolFormat::kQwenXml
                                 ? "<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n<parameter=b>\n3\n"
                                   "</parameter>\n</function>\n</tool_call>"
                                 : "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>";
    EXPECT_TRUE(takes(compiled, "Adding.\n" + call)) << tool_format_name(format);
  }
}

}  // namespace
}  // namespace folio::server
