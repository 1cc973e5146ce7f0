// Tool calls read back from model output in every family's format, as the
// families write them and as llama-server's and vLLM's parsers take them:
// each text fed in pieces of every size gives the reading the whole text
// gives, calls that do not parse come back as content as they were written,
// and a fenced JSON block is a call only when it names an offered tool with
// arguments that fit its schema.
#include "server/api/tool_call_parser.h"

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <string>
#include <vector>

namespace folio::server {
namespace {

struct Call {
  std::string id, name, arguments;
};

struct Reading {
  std::string content;
  std::vector<Call> calls;
};

ToolRequest offered_tools() {
  return read_tools(parse_json_object(R"({"tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
          "required": ["city"]}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
          "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
          "additionalProperties": false}}}]})"))
      .value();
}

// The events of one output fed `piece` bytes at a time, folded as a client
// folds streamed deltas.
Reading read(ToolFormat format, const std::string& text, std::size_t piece, const ToolRequest* tools) {
  ToolCallParser parser(format, tools);
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

// Every piece size, 1 byte to the whole text, gives the same reading.
Reading read_all_ways(ToolFormat format, const std::string& text, const ToolRequest* tools = nullptr) {
  const Reading whole = read(format, text, text.size() + 1, tools);
  for (std::size_t piece = 1; piece <= text.size(); ++piece) {
    const Reading r = read(format, text, piece, tools);
    EXPECT_EQ(r.content, whole.content) << "piece " << piece << " of " << text;
    EXPECT_EQ(r.calls.size(), whole.calls.size()) << "piece " << piece << " of " << text;
    for (std::size_t i = 0; i < std::min(r.calls.size(), whole.calls.size()); ++i) {
      EXPECT_EQ(r.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(r.calls[i].arguments, whole.calls[i].arguments) << "piece " << piece << " of " << text;
    }
  }
  return whole;
}

struct Case {
  ToolFormat format;
  std::string text;
  std::string content;                                       // what stays content
  std::vector<std::pair<std::string, std::string>> calls;    // name, arguments (compact JSON unless streamed)
};

void check(const Case& c, const ToolRequest* tools) {
  SCOPED_TRACE(std::string(tool_format_name(c.format)) + ": " + c.text);
  const Reading r = read_all_ways(c.format, c.text, tools);
  EXPECT_EQ(r.content, c.content);
  ASSERT_EQ(r.calls.size(), c.calls.size());
  for (std::size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(r.calls[i].name, c.calls[i].first);
    EXPECT_EQ(r.calls[i].arguments, c.calls[i].second);
    if (mistral_ids(c.format)) {
      EXPECT_EQ(r.calls[i].id.size(), 9u) << r.calls[i].id;
      for (char ch : r.calls[i].id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << r.calls[i].id;
    } else {
      EXPECT_EQ(r.calls[i].id.rfind("call_", 0), 0u) << r.calls[i].id;
    }
  }
}

using F = ToolFormat;
const std::string kParis = R"({"city":"Paris"})";
const std::string kAdd = R"({"a":2,"b":3})";

TEST(ToolCallParserTest, HermesCallsStreamTheirArgumentsAndLeaveTheContent) {
  const Reading r = read_all_ways(F::kHermes,
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
  const Reading r =
      read_all_ways(F::kHermes, "<tool_call>{\"arguments\": {\"q\": \"x\"}, \"name\": \"search\"}</tool_call>");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "search");
  EXPECT_EQ(r.calls[0].arguments, "{\"q\":\"x\"}");
}

TEST(ToolCallParserTest, TextThatIsNoCallStaysContentAsWritten) {
  EXPECT_EQ(read_all_ways(F::kHermes, "a <tool_ b <tool_cal").content, "a <tool_ b <tool_cal");
  const std::string broken = "x <tool_call>not json</tool_call> y";
  const Reading r = read_all_ways(F::kHermes, broken);
  EXPECT_EQ(r.content, broken);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(read_all_ways(F::kHermes, "no calls here").content, "no calls here");
}

TEST(ToolCallParserTest, ACallCutOffByTheLengthKeepsWhatCame) {
  const Reading r = read_all_ways(F::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[0].arguments, "{\"a\": [1, 2");
  const Reading unnamed = read_all_ways(F::kHermes, "<tool_call>\n{\"na");
  EXPECT_TRUE(unnamed.calls.empty());
  EXPECT_EQ(unnamed.content, "<tool_call>\n{\"na");
}

// Each family's spellings: what its models write, and what the peers'
// parsers for it take.
TEST(ToolCallParserTest, EveryFamilysCallsAreRead) {
  const ToolRequest tools = offered_tools();
  const std::vector<Case> cases = {
      // Qwen3-Coder: XML, values typed by the schema; <tool_call> may be left out.
      {F::kQwenXml,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n"
       "</parameter>\n</function>\n</tool_call>",
       "",
       {{"get_weather", R"({"city":"Paris","unit":"celsius"})"}}},
      {F::kQwenXml,
       "Adding.\n<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n<parameter=b>\n3\n</parameter>\n"
       "</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew\nYork\n</parameter>\n"
       "</function>\n</tool_call>",
       "Adding.\n",
       {{"add", kAdd}, {"get_weather", R"({"city":"New\nYork"})"}}},
      {F::kQwenXml, "<function=add>\n<parameter=a>\n2\n<parameter=b>\n3\n</function>", "", {{"add", kAdd}}},
      {F::kQwenXml, "Use <function name> here.", "Use <function name> here.", {}},
      {F::kQwenXml, "<tool_call>\n<function=bad name>\n</function>\n</tool_call>",
       "<tool_call>\n<function=bad name>\n</function>\n</tool_call>", {}},
      // Hermes blocks may hold Qwen's XML too (Qwen3 does, now and then).
      {F::kHermes, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
       "", {{"get_weather", kParis}}},
      // Mistral: the JSON list, and v11's NAME[ARGS]{...}; [TOOL_CALLS] may be
      // in the text (rendered) or not (skipped as a control token).
      {F::kMistral, R"([TOOL_CALLS][{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "get_weather", "arguments": {"city": "Paris"}}])",
       "", {{"add", kAdd}, {"get_weather", kParis}}},
      {F::kMistral, R"([{"name": "add", "arguments": {"a": 2, "b": 3}}])", "", {{"add", kAdd}}},
      {F::kMistral, "Hello [there]", "Hello [there]", {}},
      {F::kMistral, "[not a call]", "[not a call]", {}},
      {F::kMistralArgs, R"([TOOL_CALLS]get_weather[ARGS]{"city": "Paris"})", "", {{"get_weather", kParis}}},
      {F::kMistralArgs, R"(get_weather[ARGS]{"city": "Paris"})", "", {{"get_weather", kParis}}},
      {F::kMistralArgs, R"([TOOL_CALLS]add[ARGS]{"a": 2, "b": 3}[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"})", "",
       {{"add", kAdd}, {"get_weather", kParis}}},
      {F::kMistralArgs, R"(Let me look.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"})", "Let me look.",
       {{"get_weather", kParis}}},
      {F::kMistralArgs, R"([TOOL_CALLS]get_weather[ARGS]{"city": )", R"([TOOL_CALLS]get_weather[ARGS]{"city": )", {}},
      {F::kMistralArgs, "get the weather", "get the weather", {}},
      // Llama 3.x/4: JSON with "parameters", after <|python_tag|>, Llama 4's
      // python tags, or bare; several with ';'; Python-style lists too.
      {F::kLlama3, R"({"name": "get_weather", "parameters": {"city": "Paris"}})", "", {{"get_weather", kParis}}},
      {F::kLlama3, R"(<|python_tag|>{"name": "add", "parameters": {"a": 2, "b": 3}}; {"name": "get_weather", "parameters": {"city": "Paris"}})",
       "", {{"add", kAdd}, {"get_weather", kParis}}},
      {F::kLlama3, R"(<|python_start|><|python_end|>{"name": "get_weather", "parameters": {"city": "Paris"}}<|eom|>)", "",
       {{"get_weather", kParis}}},
      {F::kLlama3, R"([get_weather(city="Paris"), add(a=2, b=3)])", "", {{"get_weather", kParis}, {"add", kAdd}}},
      {F::kLlama3, "The answer is 4.", "The answer is 4.", {}},
      {F::kLlama3, "{not json", "{not json", {}},
      // Pythonic: Python literals of every kind.
      {F::kPythonic,
       R"([get_weather(city='Paris', unit="celsius"), add(a=2, b=3), f(x=[1, 2.5, True, None], y={'k': (1, 2)})])", "",
       {{"get_weather", R"({"city":"Paris","unit":"celsius"})"},
        {"add", kAdd},
        {"f", R"({"x":[1,2.5,true,null],"y":{"k":[1,2]}})"}}},
      {F::kPythonic, R"(<|python_start|>[get_weather(city="Paris")]<|python_end|>)", "", {{"get_weather", kParis}}},
      {F::kPythonic, "[get_weather(city=Paris)]", "[get_weather(city=Paris)]", {}},
      {F::kPythonic, "[1, 2, 3] are numbers", "[1, 2, 3] are numbers", {}},
      // Granite 3.x: <|tool_call|> then the JSON list.
      {F::kGranite, R"(<|tool_call|>[{"name": "add", "arguments": {"a": 2, "b": 3}}])", "", {{"add", kAdd}}},
      {F::kGranite, R"([{"name": "get_weather", "arguments": {"city": "Paris"}}])", "", {{"get_weather", kParis}}},
      {F::kGranite, R"(Sure.<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}])", "Sure.",
       {{"get_weather", kParis}}},
      {F::kGranite, R"(<|tool_call|>[{"name": }])", R"(<|tool_call|>[{"name": }])", {}},
      // Phi-4-mini: <|tool_call|>...<|/tool_call|> (the close often left
      // out, the list's brackets too), or vLLM's functools[...].
      {F::kPhi4Mini, R"(<|tool_call|>[{"name": "add", "arguments": {"a": 2, "b": 3}}]<|/tool_call|>Done.)", "Done.",
       {{"add", kAdd}}},
      {F::kPhi4Mini, R"(<|tool_call|>{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "get_weather", "arguments": {"city": "Paris"}})",
       "", {{"add", kAdd}, {"get_weather", kParis}}},
      {F::kPhi4Mini, R"(functools[{"name": "get_weather", "arguments": {"city": "Paris"}}])", "",
       {{"get_weather", kParis}}},
      {F::kPhi4Mini, "Plain answer.", "Plain answer.", {}},
      // GLM-4-0414: the name on a line, then the JSON arguments.
      {F::kGlm4, "get_weather\n{\"city\": \"Paris\"}", "", {{"get_weather", kParis}}},
      {F::kGlm4, "add\n{\"a\": 2, \"b\": 3}<|assistant|>get_weather\n{\"city\": \"Paris\"}", "",
       {{"add", kAdd}, {"get_weather", kParis}}},
      {F::kGlm4, "Hello there", "Hello there", {}},
      {F::kGlm4, "getaway\n{\"a\": 1}", "getaway\n{\"a\": 1}", {}},
      {F::kGlm4, "get_weather\n{\"ci", "get_weather\n{\"ci", {}},
      // A raw tab inside a string (a forced call's grammar lets one through)
      // comes out escaped, as strict JSON readers need it.
      {F::kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par\tis\"}}\n</tool_call>", "",
       {{"get_weather", "{\"city\": \"Par\\tis\"}"}}},
      {F::kGranite, "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par\tis\"}}]", "",
       {{"get_weather", R"({"city":"Par\tis"})"}}},
  };
  for (const Case& c : cases) check(c, &tools);
}

TEST(ToolCallParserTest, MistralCallIdsAreNineLettersAndDigitsAndTheModelsOwnAreKept) {
  const ToolRequest tools = offered_tools();
  const Reading r = read_all_ways(
      F::kMistralArgs, R"([TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{"city": "Paris"}[TOOL_CALLS]add[ARGS]{"a": 2, "b": 3})",
      &tools);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].id, "abc123XYZ");
  EXPECT_EQ(r.calls[1].id.size(), 9u);
  EXPECT_NE(r.calls[1].id, new_tool_call_id(F::kMistral));
  for (int i = 0; i < 1000; ++i) {
    const std::string a = new_tool_call_id(F::kMistral), b = new_tool_call_id(F::kMistralArgs);
    ASSERT_EQ(a.size(), 9u);
    ASSERT_NE(a, b);
  }
}

// Issue 38: Qwen2.5-Coder answers a tool question with a fenced JSON block
// instead of its template's <tool_call> tags.
TEST(ToolCallParserTest, AFencedJsonBlockIsACallOnlyWhenItFitsAnOfferedTool) {
  const ToolRequest tools = offered_tools();
  const std::string fenced =
      "```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\n    \"city\": \"Paris\",\n    \"unit\": "
      "\"celsius\"\n  }\n}\n```";
  const std::vector<Case> calls = {
      {F::kHermes, fenced, "", {{"get_weather", R"({"city":"Paris","unit":"celsius"})"}}},
      {F::kHermes, "Sure!\n" + fenced + "\nThat asks for the weather.", "Sure!\n\nThat asks for the weather.",
       {{"get_weather", R"({"city":"Paris","unit":"celsius"})"}}},
      {F::kGeneric, "```\n[{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}]\n```", "", {{"add", kAdd}}},
      {F::kLlama3, "```json\n{\"name\": \"add\", \"parameters\": {\"a\": 2, \"b\": 3}}\n```", "", {{"add", kAdd}}},
  };
  for (const Case& c : calls) check(c, &tools);
  // Each of these stays content, as written.
  const std::vector<std::string> not_calls = {
      "```json\n{\"name\": \"get_time\", \"arguments\": {}}\n```",                         // no such tool
      "```json\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\"}}\n```",  // city is required
      "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"kelvin\"}}\n```",
      "```json\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3, \"c\": 4}}\n```",  // no other keys
      "```json\n{\"name\": \"add\", \"arguments\": {\"a\": 2.5, \"b\": 3}}\n```",
      "```json\n{\"city\": \"Paris\"}\n```",
      "```python\nprint({\"name\": \"add\"})\n```\nand ```js\nx```",
      "Use ``` for code and ```json\n[1, 2]\n``` for data.",
      "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",  // cut off
  };
  for (const std::string& text : not_calls) check({F::kHermes, text, text, {}}, &tools);
  // With no tools known nothing fenced is read.
  EXPECT_EQ(read_all_ways(F::kHermes, fenced).content, fenced);
}

TEST(ToolCallParserTest, ALongCallStreamedByteByByteCostsLinearTime) {
  // A closing tag looked for in all the text again at every byte would be
  // quadratic: 10^12 comparisons here.
  const ToolRequest tools = offered_tools();
  const std::string big(1 << 20, 'x');
  const std::vector<std::pair<ToolFormat, std::string>> calls = {
      {F::kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" + big + "\"}}\n</tool_call>"},
      {F::kPhi4Mini, "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" + big + "\"}}]<|/tool_call|>"},
      {F::kQwenXml, "<tool_call>\n<function=get_weather>\n<parameter=city>\n" + big + "\n</parameter>\n</function>\n</tool_call>"},
      {F::kHermes, "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" + big + "\"}}\n```"},
  };
  for (const auto& [format, text] : calls) {
    const auto start = std::chrono::steady_clock::now();
    const Reading r = read(format, text, 1, &tools);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(r.calls.size(), 1u) << tool_format_name(format);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_NE(r.calls[0].arguments.find(big), std::string::npos);
    EXPECT_LT(seconds, 10.0) << tool_format_name(format);
  }
}

}  // namespace
}  // namespace folio::server
