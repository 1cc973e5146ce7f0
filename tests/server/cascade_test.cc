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

}  // namespace
}  // namespace folio::server
