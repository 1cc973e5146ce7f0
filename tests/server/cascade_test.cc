// The cascade's reading of an answer: its spec, the three confidence
// scores from a chat completion's logprobs, and the logprobs given back as
// the client asked for them.
#include "server/cascade.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace folio::server {
namespace {

Json answer() {
  return Json::parse(R"({"choices": [{"index": 0, "message": {"content": "Paris"}, "logprobs": {"content": [
      {"token": "Par", "logprob": -0.5, "top_logprobs": [{"token": "Par", "logprob": -0.5},
                                                         {"token": "Lon", "logprob": -1.5}]},
      {"token": "is", "logprob": -0.1, "top_logprobs": [{"token": "is", "logprob": -0.1},
                                                        {"token": "k", "logprob": -3.1}]}]}}]})");
}

TEST(CascadeTest, SpecsReadAsNameSmallLarge) {
  const CascadeSpec c = parse_cascade_spec("cascade=small,big-model");
  EXPECT_EQ(c.name, "cascade");
  EXPECT_EQ(c.small, "small");
  EXPECT_EQ(c.large, "big-model");
  for (const char* bad : {"cascade", "=a,b", "c=a", "c=,b", "c=a,", "c=a,b,d"})
    EXPECT_THROW(parse_cascade_spec(bad), Error) << bad;
  EXPECT_EQ(parse_cascade_measure("margin"), CascadeMeasure::kMargin);
  EXPECT_FALSE(parse_cascade_measure("median"));
}

TEST(CascadeTest, ConfidenceScores) {
  const Json a = answer();
  EXPECT_DOUBLE_EQ(answer_confidence(a, CascadeMeasure::kMin), -0.5);
  EXPECT_DOUBLE_EQ(answer_confidence(a, CascadeMeasure::kMean), -0.3);
  EXPECT_DOUBLE_EQ(answer_confidence(a, CascadeMeasure::kMargin), 1.0);
  Json empty = a;
  empty["choices"][0]["logprobs"]["content"] = Json::array();
  EXPECT_TRUE(std::isinf(answer_confidence(empty, CascadeMeasure::kMin)));  // no tokens: never sure
  EXPECT_TRUE(std::isinf(answer_confidence(Json::object(), CascadeMeasure::kMean)));
}

TEST(CascadeTest, LogprobsAreGivenBackAsAsked) {
  Json none = answer();
  trim_logprobs(none, /*asked=*/false, 0);
  EXPECT_TRUE(none["choices"][0]["logprobs"].is_null());
  Json one = answer();
  trim_logprobs(one, /*asked=*/true, 1);
  for (const Json& token : one["choices"][0]["logprobs"]["content"]) EXPECT_EQ(token["top_logprobs"].size(), 1u);
  Json zero = answer();
  trim_logprobs(zero, /*asked=*/true, 0);
  for (const Json& token : zero["choices"][0]["logprobs"]["content"]) EXPECT_TRUE(token["top_logprobs"].empty());
}

// A whole answer told as a stream: the events parse, carry the answer's
// id and model, open with the role, hold the message (tool calls indexed as
// a stream indexes them) with its finish, then the usage when asked, then [DONE].
TEST(CascadeTest, AWholeAnswerIsToldAsAStream) {
  const Json whole = parse_json_object(R"({"id": "chatcmpl-1", "object": "chat.completion", "created": 7,
      "model": "small", "system_fingerprint": "fp_1", "choices": [{"index": 0, "message": {"role": "assistant",
      "content": "Paris.", "reasoning_content": "Easy.", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "f", "arguments": "{}"}}]}, "logprobs": null, "finish_reason": "tool_calls"}],
      "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}})");
  for (bool usage : {false, true}) {
    const std::string text = stream_events_of(whole, usage);
    std::vector<Json> chunks;
    std::size_t at = 0;
    for (std::size_t end; (end = text.find("\n\n", at)) != std::string::npos; at = end + 2) {
      ASSERT_EQ(text.compare(at, 6, "data: "), 0) << text;
      const std::string data = text.substr(at + 6, end - at - 6);
      if (data == "[DONE]") break;
      chunks.push_back(parse_json_object(data));
    }
    EXPECT_EQ(at + 14, text.size()) << "[DONE] ends it";
    ASSERT_EQ(chunks.size(), usage ? 3u : 2u);
    for (const Json& c : chunks) {
      EXPECT_EQ(c["id"], "chatcmpl-1");
      EXPECT_EQ(c["object"], "chat.completion.chunk");
      EXPECT_EQ(c["model"], "small");
      EXPECT_EQ(c["system_fingerprint"], "fp_1");
    }
    EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    const Json& delta = chunks[1]["choices"][0]["delta"];
    EXPECT_EQ(delta["content"], "Paris.");
    EXPECT_EQ(delta["reasoning_content"], "Easy.");
    EXPECT_EQ(delta["tool_calls"][0]["index"], 0);
    EXPECT_EQ(delta["tool_calls"][0]["function"]["name"], "f");
    EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "tool_calls");
    if (usage) {
      EXPECT_TRUE(chunks[2]["choices"].empty());
      EXPECT_EQ(chunks[2]["usage"]["completion_tokens"], 4);
      EXPECT_TRUE(chunks[1]["usage"].is_null() && chunks[1].contains("usage"));
    } else {
      EXPECT_FALSE(chunks[1].contains("usage"));
    }
  }
}

}  // namespace
}  // namespace folio::server
