// Each family's tool format told from its template; tools and schemas kept in
// the order written; bad tool definitions refused with a 400 naming the
// problem; reasoning told apart from the answer at every piece size.
#include "server/api/tool_calls.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "server/api/api_error.h"
#include "server/api/reasoning.h"

namespace folio::server {
namespace {

TEST(ToolFormatTest, TheFormatComesFromTheTemplate) {
  EXPECT_EQ(tool_format_of("{{- '<tool_call>\\n' }}"), ToolFormat::kHermes);
  EXPECT_EQ(tool_format_of("{{- '[TOOL_CALLS] ' }}"), ToolFormat::kMistral);
  EXPECT_EQ(tool_format_of("{%- if tools %}{{ '\"parameters\": ' }}{% endif %}"), ToolFormat::kLlama3);
  EXPECT_EQ(tool_format_of("{% for m in messages %}{{ m.content }}{% endfor %}"), ToolFormat::kGeneric);
}

TEST(ToolFormatTest, EveryFamilysTemplateIsToldApart) {
  auto format_of = [](const char* name) {
    std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/tests/data/chat_templates/" + name, std::ios::binary);
    EXPECT_TRUE(in) << name;
    return tool_format_of(std::string(std::istreambuf_iterator<char>(in), {}));
  };
  EXPECT_EQ(format_of("qwen2.5-coder-0.5b-instruct.jinja"), ToolFormat::kHermes);
  EXPECT_EQ(format_of("qwen3-0.6b.jinja"), ToolFormat::kHermes);
  EXPECT_EQ(format_of("llama-3.1-8b-instruct.jinja"), ToolFormat::kLlama3);
  EXPECT_EQ(format_of("llama-3.2-1b-instruct.jinja"), ToolFormat::kLlama3);
  EXPECT_EQ(format_of("mistral-7b-instruct-v0.3.jinja"), ToolFormat::kMistral);
  EXPECT_EQ(format_of("smollm2-135m-instruct.jinja"), ToolFormat::kGeneric);
  EXPECT_EQ(format_of("gemma-3-it.jinja"), ToolFormat::kGeneric);
  // Issue 39's families.
  EXPECT_EQ(format_of("qwen3-coder.jinja"), ToolFormat::kQwenXml);
  EXPECT_EQ(format_of("smollm3-3b.jinja"), ToolFormat::kHermes);
  EXPECT_EQ(format_of("smollm3-3b-unsloth.jinja"), ToolFormat::kGeneric);
  EXPECT_EQ(format_of("mistral-nemo-instruct-2407.jinja"), ToolFormat::kMistral);
  EXPECT_EQ(format_of("mistral-small-3.2-24b-instruct-2506.jinja"), ToolFormat::kMistralArgs);
  EXPECT_EQ(format_of("ministral-3-14b-reasoning-2512.jinja"), ToolFormat::kMistralArgs);
  EXPECT_EQ(format_of("llama-3.3-70b-instruct.jinja"), ToolFormat::kLlama3);
  EXPECT_EQ(format_of("llama-4-scout-17b-16e-instruct.jinja"), ToolFormat::kLlama3);
  EXPECT_EQ(format_of("vllm-llama4-pythonic.jinja"), ToolFormat::kPythonic);
  EXPECT_EQ(format_of("granite-3.3-2b-instruct.jinja"), ToolFormat::kGranite);
  EXPECT_EQ(format_of("granite-4.0.jinja"), ToolFormat::kHermes);
  EXPECT_EQ(format_of("phi-4-mini-instruct.jinja"), ToolFormat::kPhi4Mini);
  EXPECT_EQ(format_of("glm-z1-9b-0414.jinja"), ToolFormat::kGlm4);
  for (const char* none : {"gemma-2-it.jinja", "phi-3-mini-4k-instruct.jinja", "phi-3.5-mini-instruct.jinja",
                           "olmo-2-1124-7b-sft.jinja"})
    EXPECT_EQ(format_of(none), ToolFormat::kGeneric) << none;
}

// Reasoning pieces folded, the output fed `piece` bytes at a time.
std::pair<std::string, std::string> think(bool inside, const std::string& text, std::size_t piece) {
  ReasoningParser parser(inside);
  std::string reasoning, content;
  auto fold = [&](const std::vector<ReasoningParser::Piece>& pieces) {
    for (const auto& p : pieces) (p.reasoning ? reasoning : content) += p.text;
  };
  for (std::size_t at = 0; at < text.size(); at += piece) fold(parser.feed(text.substr(at, piece)));
  fold(parser.finish());
  return {reasoning, content};
}

TEST(ReasoningParserTest, ThinkingIsToldApartFromTheAnswerAtEveryPieceSize) {
  const std::vector<std::tuple<bool, std::string, std::string, std::string>> cases = {
      {false, "<think>\nLet me add.\n</think>\n\nIt is 4.", "\nLet me add.\n", "It is 4."},
      {false, "  <think>a</think>b", "a", "b"},
      {false, "No thinking here.", "", "No thinking here."},
      {false, "<thin", "", "<thin"},                                       // a cut-off tag that never opened
      {true, "started inside</think>answer", "started inside", "answer"},  // DeepSeek-R1's template opens it
      {true, "cut off while thinking", "cut off while thinking", ""},
      {false, "<think>x</think>", "x", ""},
      {false, "a <think>b</think>", "", "a <think>b</think>"},  // only a leading tag opens thinking
      // Mistral's [THINK] tags (Magistral, Ministral 3 reasoning).
      {false, "[THINK]Let me add.[/THINK]It is 4.", "Let me add.", "It is 4."},
      {false, "  [THINK]x[/THINK]\n\ny", "x", "y"},
      {true, "started inside[/THINK]answer", "started inside", "answer"},
      {false, "[THIN", "", "[THIN"},
      // Each pair closes only itself.
      {false, "<think>a[/THINK]b</think>c", "a[/THINK]b", "c"},
      // Granite 3.3 wraps its answer after a thought in <response> tags.
      {false, "<think>plan</think>\n<response>Paris.</response>\n", "plan", "Paris."},
      {false, "<think>plan</think><response>a</response> b", "plan", "a</response> b"},
      {false, "<response>not after a thought</response>", "", "<response>not after a thought</response>"},
      {false, "  leading space kept", "", "  leading space kept"},
  };
  for (const auto& [inside, text, reasoning, content] : cases)
    for (std::size_t piece = 1; piece <= text.size() + 1; ++piece) {
      const auto [r, c] = think(inside, text, piece);
      EXPECT_EQ(r, reasoning) << text << " in pieces of " << piece;
      EXPECT_EQ(c, content) << text << " in pieces of " << piece;
    }
  EXPECT_TRUE(prompt_opens_thinking("<|Assistant|><think>\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_thinking("<|im_start|>assistant\n"));
  EXPECT_TRUE(prompt_opens_thinking("[INST]Hi[/INST][THINK]"));
  EXPECT_TRUE(template_thinks("{{ '<think>' }}...{{ '</think>' }}"));
  EXPECT_TRUE(template_thinks("{{- '[THINK]' + block['thinking'] + '[/THINK]' }}"));
  EXPECT_TRUE(template_thinks_in_control_tokens("{{- '[THINK]' + block['thinking'] + '[/THINK]' }}"));
  EXPECT_FALSE(template_thinks_in_control_tokens("{{ '<think>' }}...{{ '</think>' }}"));
  EXPECT_FALSE(template_thinks("{{ messages }}"));
}

int status_of(const std::string& body) {
  try {
    read_tools(parse_json_object(body));
    return 200;
  } catch (const ApiError& e) {
    return e.status();
  }
}

TEST(ReadToolsTest, ToolsKeepTheirWrittenOrderAndBadOnesAre400) {
  const std::string body =
      R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}], "tool_choice": "required"})";
  const std::optional<ToolRequest> tools = read_tools(parse_json_object(body));
  ASSERT_TRUE(tools);
  EXPECT_EQ(tools->choice, ToolRequest::Choice::kRequired);
  EXPECT_EQ(dump_json(tools->parameters[0]["properties"]), R"({"zeta":{"type":"string"},"alpha":{"type":"integer"}})");
  const std::optional<ConstraintSpec> spec = tool_constraint(*tools, ToolFormat::kHermes);
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->kind, ConstraintSpec::Kind::kStructuralTag);
  EXPECT_NE(spec->text.find("tags_with_separator"), std::string::npos);
  EXPECT_LT(spec->text.find("zeta"), spec->text.find("alpha"));

  EXPECT_EQ(status_of(R"({"tools": {}})"), 400);
  EXPECT_EQ(status_of(R"({"tools": [{"type": "retrieval"}]})"), 400);
  EXPECT_EQ(status_of(R"({"tools": [{"type": "function", "function": {"name": "bad name"}}]})"), 400);
  EXPECT_EQ(status_of(R"({"tools": [{"type": "function", "function": {"name": "f"}},
                                   {"type": "function", "function": {"name": "f"}}]})"),
            400);
  EXPECT_EQ(status_of(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})"), 400);
  EXPECT_EQ(status_of(R"({"tools": [{"type": "function", "function": {"name": "f"}}],
                          "tool_choice": {"type": "function", "function": {"name": "g"}}})"),
            400);
  EXPECT_EQ(status_of(R"({"tool_choice": "required"})"), 400);
  EXPECT_EQ(status_of(R"({"tool_choice": "sometimes", "tools": [{"type": "function", "function": {"name": "f"}}]})"),
            400);
  EXPECT_EQ(status_of(R"({"tools": [{"type": "function", "function": {"name": "f",
                          "parameters": {"type": "object", "type": "array"}}}]})"),
            400);  // a key twice: which was meant cannot be known
  EXPECT_EQ(status_of(R"({"tools": [], "tool_choice": "auto"})"), 200);
}

TEST(ReadToolsTest, OrderedParsingCostsLinearTime) {
  // One object of many keys: an ordered_json insert checks every key before
  // it (quadratic); parsing the body must not.
  std::string body = R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {)";
  for (int i = 0; i < 200000; ++i) body += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":{}";
  body += "}}}}]}";
  const auto start = std::chrono::steady_clock::now();
  const std::optional<ToolRequest> tools = read_tools(parse_json_object(body));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(tools);
  EXPECT_EQ(tools->parameters[0]["properties"].size(), 200000u);
  EXPECT_LT(seconds, 5.0);  // quadratic would be 2e10 key comparisons
}

}  // namespace
}  // namespace folio::server
