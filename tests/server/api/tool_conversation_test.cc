// A conversation with tools shaped for each family's own template and
// rendered by it: the tools where the template reads them, earlier calls and
// their results in the form the family was trained on.
#include "server/api/tool_conversation.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "server/api/chat_request.h"

namespace folio::server {
namespace {

const char* const kBody = R"({"model": "m", "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "The weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
    "required": ["city"]}}}],
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_0123456789abcdef", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_0123456789abcdef", "content": "{\"sky\": \"sunny\"}"}]})";

// The conversation of kBody shaped for `template_file` and rendered by it.
std::string render(const char* template_file, const std::string& body = kBody) {
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/tests/data/chat_templates/" + template_file, std::ios::binary);
  EXPECT_TRUE(in) << template_file;
  const ChatTemplate tmpl(std::string(std::istreambuf_iterator<char>(in), {}));
  ChatRequest r = read_chat_completion(parse_json_object(body));
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.now = 1722000000;
  shape_tool_conversation(tool_format_of(tmpl.source()), tmpl.source(), r.tools, r.messages, options);
  Json messages = Json::array();
  for (const ChatMessage& m : r.messages) {
    Json j = {{"role", m.role}};
    j["content"] = m.content_null ? Json(nullptr) : Json(m.content);
    for (const auto& [key, value] : m.fields.items()) j[key] = value;
    messages.push_back(std::move(j));
  }
  return tmpl.render(messages, options);
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "no " << part << " in\n" << text;
}

TEST(ToolConversationTest, PhiFourMiniReadsItsToolsFromTheSystemMessage) {
  const std::string text = render("phi-4-mini-instruct.jinja");
  expect_has(text, "<|system|>Be brief.<|tool|>[{\"name\":\"get_weather\",\"description\":\"The weather\"");
  expect_has(text, "<|/tool|><|end|><|user|>Weather in Paris?<|end|>");
  expect_has(text, "<|assistant|><|tool_call|>[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}]<|/tool_call|>");
}

TEST(ToolConversationTest, GlmFourGetsMetadataAndObservationTurns) {
  const std::string text = render("glm-z1-9b-0414.jinja");
  expect_has(text, "## get_weather");
  expect_has(text, "<|assistant|>get_weather\n{\"city\":\"Paris\"}");
  expect_has(text, "<|observation|>\n{\"sky\": \"sunny\"}");
}

TEST(ToolConversationTest, MistralGetsNineCharacterIdsTheSameInTheCallAndItsResult) {
  for (const char* t : {"mistral-nemo-instruct-2407.jinja", "mistral-small-3.2-24b-instruct-2506.jinja",
                        "mistral-7b-instruct-v0.3.jinja"}) {
    SCOPED_TRACE(t);
    const std::string text = render(t);  // the templates raise on any other id
    const std::size_t results = text.find("[TOOL_RESULTS]");
    ASSERT_NE(results, std::string::npos) << text;
    EXPECT_EQ(text.find("call_0123456789abcdef"), std::string::npos);
    // The id the call carries is the one its result names.
    std::size_t at = text.find("[CALL_ID]");  // v11 writes it so, the older ones as JSON
    const std::size_t skip = at != std::string::npos ? 9 : 7;
    if (at == std::string::npos) at = text.find("\"id\": \"");
    ASSERT_NE(at, std::string::npos) << text;
    const std::string id = text.substr(at + skip, 9);
    EXPECT_NE(text.find(id, results), std::string::npos) << id << " in\n" << text;
  }
}

TEST(ToolConversationTest, ATemplateThatPrintsNoCallsGetsThemWrittenInTheFamilysForm) {
  const std::string granite = render("granite-3.3-2b-instruct.jinja");
  expect_has(granite, "<|start_of_role|>available_tools<|end_of_role|>");
  expect_has(granite, "<|start_of_role|>assistant<|end_of_role|><|tool_call|>[{\"name\":\"get_weather\",\"arguments\":"
                      "{\"city\":\"Paris\"}}]<|end_of_text|>");
  expect_has(granite, "<|start_of_role|>tool<|end_of_role|>{\"sky\": \"sunny\"}");
}

TEST(ToolConversationTest, TemplatesThatPrintCallsGetThemAsOpenAiSendsThem) {
  const std::string coder = render("qwen3-coder.jinja");
  expect_has(coder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>");
  expect_has(coder, "<tool_response>\n{\"sky\": \"sunny\"}\n</tool_response>");
  const std::string llama = render("llama-3.3-70b-instruct.jinja");
  expect_has(llama, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
  const std::string smol = render("smollm3-3b.jinja");
  expect_has(smol, "<tools>\n{");
  expect_has(smol, "get_weather");
}

TEST(ToolConversationTest, AGenericTemplateGetsTheToolsDescribed) {
  const std::string text = render("smollm3-3b-unsloth.jinja");
  expect_has(text, "# Tools");
  expect_has(text, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>");
  expect_has(text, "<tool_response>\n{\"sky\": \"sunny\"}\n</tool_response>");
}

TEST(ToolConversationTest, CallsWrittenAsTheFamilyWritesThem) {
  const Json calls = parse_json(R"([{"function": {"name": "f", "arguments": {"a": 1, "s": "x", "b": true, "n": null}}},
                                     {"function": {"name": "g", "arguments": {}}}])")
                         .value();
  EXPECT_EQ(tool_calls_as_text(ToolFormat::kPythonic, calls), R"([f(a=1, s="x", b=True, n=None), g()])");
  EXPECT_EQ(tool_calls_as_text(ToolFormat::kMistralArgs, calls),
            R"([TOOL_CALLS]f[ARGS]{"a":1,"s":"x","b":true,"n":null}[TOOL_CALLS]g[ARGS]{})");
  EXPECT_EQ(tool_calls_as_text(ToolFormat::kMistral, calls),
            R"([TOOL_CALLS][{"name":"f","arguments":{"a":1,"s":"x","b":true,"n":null}},{"name":"g","arguments":{}}])");
  EXPECT_EQ(tool_calls_as_text(ToolFormat::kGlm4, calls), "f\n{\"a\":1,\"s\":\"x\",\"b\":true,\"n\":null}\ng\n{}");
  EXPECT_EQ(tool_calls_as_text(ToolFormat::kLlama3, calls),
            R"({"name": "f", "parameters": {"a":1,"s":"x","b":true,"n":null}}; {"name": "g", "parameters": {}})");
}

}  // namespace
}  // namespace folio::server
