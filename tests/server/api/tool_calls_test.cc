// Tool calls read back from model output in each family's format, streamed
// in pieces of every size alike; tools and schemas kept in the order written;
// bad tool definitions refused with a 400 naming the problem.
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

struct Call {
  std::string id, name, arguments;
};

struct Reading {
  std::string content;
  std::vector<Call> calls;
};

// The events of one output fed `piece` bytes at a time, folded as a client
// folds streamed deltas.
Reading read(ToolFormat format, const std::string& text, std::size_t piece) {
  ToolCallParser parser(format);
  Reading r;
  auto fold = [&](const std::vector<OutputEvent>& events) {
    for (const OutputEvent& e : events) {
      switch (e.kind) {
        case OutputEvent::Kind::kContent:
          r.content += e.text;
          break;
        case OutputEvent::Kind::kCallStart:
          EXPECT_EQ(e.index, static_cast<int>(r.calls.size()));
          r.calls.push_back({e.id, e.text, ""});
          break;
        case OutputEvent::Kind::kArguments:
          EXPECT_EQ(e.index, static_cast<int>(r.calls.size()) - 1);
          r.calls.at(static_cast<std::size_t>(e.index)).arguments += e.text;
          break;
        case OutputEvent::Kind::kReasoning:
          ADD_FAILURE() << "a tool parser gives no reasoning";
          break;
      }
    }
  };
  for (std::size_t at = 0; at < text.size(); at += piece) fold(parser.feed(text.substr(at, piece)));
  fold(parser.finish());
  EXPECT_EQ(parser.num_calls(), static_cast<int>(r.calls.size()));
  return r;
}

// Every piece size gives the reading the whole text gives.
Reading read_all_ways(ToolFormat format, const std::string& text) {
  const Reading whole = read(format, text, text.size() + 1);
  for (std::size_t piece = 1; piece <= 7; ++piece) {
    const Reading r = read(format, text, piece);
    EXPECT_EQ(r.content, whole.content) << "piece " << piece;
    EXPECT_EQ(r.calls.size(), whole.calls.size()) << "piece " << piece;
    for (std::size_t i = 0; i < std::min(r.calls.size(), whole.calls.size()); ++i) {
      EXPECT_EQ(r.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(r.calls[i].arguments, whole.calls[i].arguments) << "piece " << piece;
    }
  }
  return whole;
}

TEST(ToolCallParserTest, HermesCallsStreamTheirArgumentsAndLeaveTheContent) {
  const Reading r = read_all_ways(ToolFormat::kHermes,
                                  "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                                  "\"Paris\", \"days\": [1, 2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", "
                                  "\"arguments\": {\"a\": 1}}\n</tool_call>");
  EXPECT_EQ(r.content, "Let me check.\n");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\", \"days\": [1, 2]}");
  EXPECT_EQ(r.calls[1].name, "add");
  EXPECT_EQ(r.calls[1].arguments, "{\"a\": 1}");
  EXPECT_EQ(r.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
}

TEST(ToolCallParserTest, HermesCallsWithKeysInAnotherOrderAreReadWhole) {
  const Reading r = read_all_ways(ToolFormat::kHermes,
                                  "<tool_call>{\"arguments\": {\"q\": \"x\"}, \"name\": \"search\"}</tool_call>");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "search");
  EXPECT_EQ(r.calls[0].arguments, "{\"q\":\"x\"}");
}

TEST(ToolCallParserTest, TextThatIsNoCallStaysContentAsWritten) {
  // A tag-like text that never opens, and a block that is no call.
  EXPECT_EQ(read_all_ways(ToolFormat::kHermes, "a <tool_ b <tool_cal").content, "a <tool_ b <tool_cal");
  const std::string broken = "x <tool_call>not json</tool_call> y";
  const Reading r = read_all_ways(ToolFormat::kHermes, broken);
  EXPECT_EQ(r.content, broken);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(read_all_ways(ToolFormat::kHermes, "no calls here").content, "no calls here");
}

TEST(ToolCallParserTest, ACallCutOffByTheLengthKeepsWhatCame) {
  const Reading r = read_all_ways(ToolFormat::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[0].arguments, "{\"a\": [1, 2");
  const Reading unnamed = read_all_ways(ToolFormat::kHermes, "<tool_call>\n{\"na");
  EXPECT_TRUE(unnamed.calls.empty());
  EXPECT_EQ(unnamed.content, "<tool_call>\n{\"na");
}

TEST(ToolCallParserTest, MistralAndLlama3CallsAreReadAtTheEnd) {
  Reading m = read_all_ways(ToolFormat::kMistral,
                            "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", "
                            "\"arguments\": {}}]");
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[0].name, "a");
  EXPECT_EQ(m.calls[0].arguments, "{\"x\":1}");
  EXPECT_EQ(m.calls[1].name, "b");
  // The tag is a control token, so the text often starts at the array.
  m = read_all_ways(ToolFormat::kMistral, "[{\"name\": \"a\", \"arguments\": {\"x\": 1}}]");
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(read_all_ways(ToolFormat::kMistral, "Hello [there]").content, "Hello [there]");
  EXPECT_EQ(read_all_ways(ToolFormat::kMistral, "[not a call]").content, "[not a call]");

  Reading l = read_all_ways(ToolFormat::kLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
  ASSERT_EQ(l.calls.size(), 1u);
  EXPECT_EQ(l.calls[0].name, "get_weather");
  EXPECT_EQ(l.calls[0].arguments, "{\"city\":\"Oslo\"}");
  l = read_all_ways(ToolFormat::kLlama3,
                    "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {}}");
  ASSERT_EQ(l.calls.size(), 2u);
  EXPECT_EQ(l.calls[1].name, "b");
  EXPECT_EQ(read_all_ways(ToolFormat::kLlama3, "The answer is 4.").content, "The answer is 4.");
}

TEST(ToolCallParserTest, TheFormatComesFromTheTemplate) {
  EXPECT_EQ(tool_format_of("{{- '<tool_call>\\n' }}"), ToolFormat::kHermes);
  EXPECT_EQ(tool_format_of("{{- '[TOOL_CALLS] ' }}"), ToolFormat::kMistral);
  EXPECT_EQ(tool_format_of("{%- if tools %}{{ '\"parameters\": ' }}{% endif %}"), ToolFormat::kLlama3);
  EXPECT_EQ(tool_format_of("{% for m in messages %}{{ m.content }}{% endfor %}"), ToolFormat::kGeneric);
}

TEST(ToolCallParserTest, TheServedFamiliesTemplatesAreToldApart) {
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
  EXPECT_TRUE(template_thinks("{{ '<think>' }}...{{ '</think>' }}"));
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
