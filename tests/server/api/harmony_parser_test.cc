// HarmonyParser: gpt-oss's channels and calls read out of its output, the
// same whether the output comes whole or byte by byte, with no harmony
// markup left in reasoning, content or arguments; and which templates are
// harmony's.
#include "server/api/harmony_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/test_models.h"

namespace folio::server {
namespace {

struct Read {
  std::string reasoning, content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool operator==(const Read&) const = default;
};

void add(Read& r, const std::vector<OutputEvent>& events) {
  for (const OutputEvent& e : events) {
    switch (e.kind) {
      case OutputEvent::Kind::kReasoning: r.reasoning += e.text; break;
      case OutputEvent::Kind::kContent: r.content += e.text; break;
      case OutputEvent::Kind::kCallStart:
        ASSERT_EQ(e.index, static_cast<int>(r.calls.size()));
        EXPECT_EQ(e.id.rfind("call_", 0), 0u) << e.id;
        r.calls.push_back({e.text, ""});
        break;
      case OutputEvent::Kind::kArguments:
        ASSERT_LT(e.index, static_cast<int>(r.calls.size()));
        r.calls[static_cast<std::size_t>(e.index)].second += e.text;
        break;
    }
  }
}

// The output read whole, and again one byte at a time: both must agree.
Read read(const std::string& output) {
  Read whole, bytes;
  HarmonyParser a;
  add(whole, a.feed(output));
  add(whole, a.finish());
  HarmonyParser b;
  for (char c : output) add(bytes, b.feed(std::string_view(&c, 1)));
  add(bytes, b.finish());
  EXPECT_EQ(whole, bytes) << output;
  EXPECT_EQ(a.num_calls(), static_cast<int>(whole.calls.size()));
  return whole;
}

TEST(HarmonyParser, AnalysisIsReasoningAndFinalIsContent) {
  const Read r = read(
      "<|channel|>analysis<|message|>The user asks 2+2. Easy.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.");
  EXPECT_EQ(r.reasoning, "The user asks 2+2. Easy.");
  EXPECT_EQ(r.content, "2 + 2 = 4.");
  EXPECT_TRUE(r.calls.empty());
}

TEST(HarmonyParser, AMessageToAFunctionIsACall) {
  const Read r = read(
      "<|channel|>analysis<|message|>Need the weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Paris\"}");
  EXPECT_EQ(r.reasoning, "Need the weather.");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].first, "get_weather");
  EXPECT_EQ(r.calls[0].second, "{\"city\": \"Paris\"}");
}

// The recipient may come before the channel, the type as a bare word; a
// call with no text has an empty object for arguments; a built-in tool
// keeps its full name.
TEST(HarmonyParser, RecipientBeforeTheChannelAndBuiltInTools) {
  Read r = read(" to=functions.lookup<|channel|>commentary json<|message|>{\"q\": 1}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0], (std::pair<std::string, std::string>{"lookup", "{\"q\": 1}"}));
  r = read("<|channel|>commentary to=functions.now <|constrain|>json<|message|>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].second, "{}");
  r = read("<|channel|>analysis<|message|>Search.<|end|><|start|>assistant<|channel|>analysis to=browser.search "
           "code<|message|>{\"query\": \"folio\"}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].first, "browser.search");
  EXPECT_EQ(r.reasoning, "Search.");
}

// A preamble to no one (commentary) is shown, as the final answer is.
TEST(HarmonyParser, CommentaryWithoutRecipientIsContent) {
  const Read r = read(
      "<|channel|>commentary<|message|>Let me check. <|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}");
  EXPECT_EQ(r.content, "Let me check. ");
  ASSERT_EQ(r.calls.size(), 1u);
}

// Text that only looks like markup stays text; an output that never opens a
// message is the answer as written, without markers; a header cut off at
// the end gives nothing.
TEST(HarmonyParser, TextThatIsNotMarkup) {
  EXPECT_EQ(read("<|channel|>final<|message|>a <|b c |> d <| e <").content, "a <|b c |> d <| e <");
  EXPECT_EQ(read("<|channel|>final<|message|>x<|notamarker|>y").content, "x<|notamarker|>y");
  EXPECT_EQ(read("Hello, plain text.").content, "Hello, plain text.");
  EXPECT_EQ(read("Hi<|end|> there").content, "Hi there");
  const Read r = read("<|channel|>final<|message|>Done.<|end|><|start|>assistant<|chan");
  EXPECT_EQ(r.content, "Done.");
  EXPECT_EQ(r.reasoning, "");
}

// A new header without <|end|> still closes the message before it.
TEST(HarmonyParser, ANewHeaderClosesTheMessage) {
  const Read r = read("<|channel|>analysis<|message|>think<|channel|>final<|message|>answer");
  EXPECT_EQ(r.reasoning, "think");
  EXPECT_EQ(r.content, "answer");
}

TEST(HarmonyParser, OnlyHarmonyTemplatesAreHarmony) {
  std::ifstream in(testing::source_path("tests/data/chat_templates/gpt-oss.jinja"), std::ios::binary);
  ASSERT_TRUE(in.good());
  const std::string gpt_oss((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(template_is_harmony(gpt_oss));
  EXPECT_EQ(tool_format_of(gpt_oss), ToolFormat::kHarmony);
  std::ifstream qwen_in(testing::source_path("tests/data/chat_templates/qwen3-0.6b.jinja"), std::ios::binary);
  const std::string qwen((std::istreambuf_iterator<char>(qwen_in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(template_is_harmony(qwen));
  EXPECT_EQ(tool_format_of(qwen), ToolFormat::kHermes);
}

}  // namespace
}  // namespace folio::server
