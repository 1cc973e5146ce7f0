// Sampler, SamplingParams, SamplingRng and TokenCounts on fixed logit rows:
// each filter and penalty against hand-computed values, seeds, a chi-squared
// check of the draws, logprobs and validation messages.
#include "engine/sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "backend/sampling/sampler_math.h"
#include "core/error.h"
#include "engine/sampling_rows.h"

namespace folio {
namespace {

using ::testing::HasSubstr;
using sampler_math::softmax_exp;
using sampler_math::softmax_weight;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

SamplingParams at_temperature(float t) {
  SamplingParams p;
  p.temperature = t;
  return p;
}

// The distribution the Sampler documents, written out plainly for a set of
// kept ids: weight = softmax_weight(l, max, T), probability = weight divided
// by the lane sum of the kept weights rounded to float.
std::vector<float> expected_probs(const std::vector<float>& processed, float temperature,
                                  const std::set<TokenId>& kept) {
  const float max_logit = *std::max_element(processed.begin(), processed.end());
  sampler_math::LaneSum total;
  for (TokenId id : kept) total.add(id, softmax_weight(processed[id], max_logit, temperature));
  std::vector<float> probs(processed.size(), 0.0f);
  for (TokenId id : kept) {
    probs[id] = softmax_weight(processed[id], max_logit, temperature) /
                static_cast<float>(total.total());
  }
  return probs;
}

std::set<TokenId> all_ids(std::size_t n) {
  std::set<TokenId> ids;
  for (std::size_t i = 0; i < n; ++i) ids.insert(static_cast<TokenId>(i));
  return ids;
}

class SamplerTest : public ::testing::Test {
 protected:
  TokenId sample(const std::vector<float>& logits, const SamplingParams& params, SamplingRng& rng) {
    return sampler_.sample(logits, params, prompt_, output_, rng).token;
  }
  TokenId sample(const std::vector<float>& logits, const SamplingParams& params) {
    SamplingRng rng = SamplingRng::from_seed(0);
    return sample(logits, params, rng);
  }
  std::vector<float> probs(const std::vector<float>& logits, const SamplingParams& params) {
    std::vector<float> out(logits.size(), -1.0f);
    sampler_.processed_probs(logits, params, prompt_, output_, out);
    return out;
  }
  std::set<TokenId> kept(const std::vector<float>& logits, const SamplingParams& params) {
    std::set<TokenId> ids;
    const std::vector<float> p = probs(logits, params);
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (p[i] > 0.0f) ids.insert(static_cast<TokenId>(i));
    }
    return ids;
  }

  Sampler sampler_;
  TokenCounts prompt_;
  TokenCounts output_;
};

// Deterministic test rows: values in [-scale, scale], quantised to 1/4 so
// that ties occur.
std::vector<float> random_logits(std::size_t n, std::uint64_t seed, float scale) {
  SamplingRng rng = SamplingRng::from_seed(static_cast<std::int64_t>(seed));
  std::vector<float> v(n);
  for (float& x : v) {
    x = std::round(static_cast<float>(rng.uniform() * 2.0 - 1.0) * scale * 4.0f) / 4.0f;
  }
  return v;
}

// ---- greedy and temperature ------------------------------------------------

TEST_F(SamplerTest, GreedyPicksTheArgmax) {
  EXPECT_EQ(sample({0.5f, 2.0f, -1.0f, 1.9f}, greedy()), 1);
  EXPECT_EQ(sample({-3.0f, -2.0f, -1.0f}, greedy()), 2);
  EXPECT_EQ(sample({7.0f}, greedy()), 0);
}

TEST_F(SamplerTest, GreedyTiesGoToTheLowestIdAndDrawNothing) {
  SamplingRng rng = SamplingRng::from_seed(7);
  const SamplingRng before = rng;
  EXPECT_EQ(sample({1.0f, 3.0f, 3.0f, 3.0f}, greedy(), rng), 1);
  EXPECT_EQ(sample({5.0f, 5.0f}, greedy(), rng), 0);
  EXPECT_EQ(rng, before);
  // Another stream, same answer.
  SamplingRng other = SamplingRng::from_seed(8);
  EXPECT_EQ(sample({1.0f, 3.0f, 3.0f, 3.0f}, greedy(), other), 1);
}

TEST_F(SamplerTest, TemperatureBelowTheGreedyThresholdIsGreedy) {
  const std::vector<float> tied = {1.0f, 3.0f, 3.0f, -2.0f};
  for (float t : {0.0f, 1e-6f, 9.9e-6f}) {
    SamplingRng rng = SamplingRng::from_seed(3);
    const SamplingRng before = rng;
    for (int i = 0; i < 50; ++i) EXPECT_EQ(sample(tied, at_temperature(t), rng), 1) << t;
    EXPECT_EQ(rng, before) << t;
    EXPECT_EQ(probs(tied, at_temperature(t)), (std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f}));
  }
}

TEST_F(SamplerTest, TinyTemperatureSamplesAmongTiesButNeverBelowThem) {
  // At T = 0.01 a gap of 2 is a factor e^-200, zero in float: the lower
  // tokens never win, while tied tops share the mass evenly (greedy would
  // take id 1 every time).
  const std::vector<float> tied = {1.0f, 3.0f, 3.0f, 1.0f};
  SamplingRng rng = SamplingRng::from_seed(11);
  int counts[4] = {0, 0, 0, 0};
  for (int i = 0; i < 400; ++i) ++counts[sample(tied, at_temperature(0.01f), rng)];
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[3], 0);
  EXPECT_GT(counts[1], 100);
  EXPECT_GT(counts[2], 100);
  EXPECT_EQ(probs(tied, at_temperature(0.01f)), (std::vector<float>{0.0f, 0.5f, 0.5f, 0.0f}));
}

TEST_F(SamplerTest, TemperatureScalesTheSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f};
  // T = 2: weights exp(-0.5), 1, exp(-1) over their sum (one lane each).
  const float w0 = softmax_exp(-0.5f);
  const float w2 = softmax_exp(-1.0f);
  const auto z = static_cast<float>((double{w0} + 1.0) + double{w2});
  EXPECT_EQ(probs(logits, at_temperature(2.0f)), (std::vector<float>{w0 / z, 1.0f / z, w2 / z}));
  EXPECT_NEAR(w0 / z, std::exp(-0.5) / (std::exp(-0.5) + 1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_EQ(probs(logits, at_temperature(2.0f)), expected_probs(logits, 2.0f, all_ids(3)));
  EXPECT_EQ(probs(logits, at_temperature(0.5f)), expected_probs(logits, 0.5f, all_ids(3)));
}

// ---- top-k, top-p, min-p ----------------------------------------------------

TEST_F(SamplerTest, TopKOneIsGreedyEvenOnTies) {
  SamplingParams params = at_temperature(1.0f);
  params.top_k = 1;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const std::vector<float> logits = random_logits(40, seed, 2.0f);
    SamplingRng rng = SamplingRng::from_seed(static_cast<std::int64_t>(seed));
    EXPECT_EQ(sample(logits, params, rng), sample(logits, greedy())) << seed;
  }
}

TEST_F(SamplerTest, TopKKeepsExactlyKTokensTiesToTheLowerId) {
  SamplingParams params = at_temperature(1.0f);
  params.top_k = 2;
  const std::vector<float> logits = {1.0f, 4.0f, 3.0f, 2.0f};
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{1, 2}));
  EXPECT_EQ(probs(logits, params), expected_probs(logits, 1.0f, {1, 2}));
  // Three tokens tie for second place: only the lowest id of them stays.
  EXPECT_EQ(kept({2.0f, 5.0f, 4.0f, 4.0f, 4.0f, 1.0f}, params), (std::set<TokenId>{1, 2}));
  // top_k 0, -1 and k >= vocabulary size are all "off".
  for (int k : {0, -1, 6, 100}) {
    params.top_k = k;
    EXPECT_EQ(kept({2.0f, 5.0f, 4.0f, 4.0f, 4.0f, 1.0f}, params), all_ids(6)) << k;
  }
}

TEST_F(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities 1/4, 1/8, 1/8, 1/2 (ids shuffled so that order matters).
  const std::vector<float> logits = {std::log(0.25f), std::log(0.125f), std::log(0.125f),
                                     std::log(0.5f)};
  SamplingParams params = at_temperature(1.0f);
  params.top_p = 0.3f;  // 1/2 reaches it alone
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{3}));
  EXPECT_EQ(probs(logits, params), (std::vector<float>{0.0f, 0.0f, 0.0f, 1.0f}));
  params.top_p = 0.6f;  // 1/2 falls short, 1/2 + 1/4 reaches it
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{0, 3}));
  EXPECT_EQ(probs(logits, params), expected_probs(logits, 1.0f, {0, 3}));
  params.top_p = 0.8f;  // needs one of the two 1/8s: the lower id
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{0, 1, 3}));
  params.top_p = 0.95f;
  EXPECT_EQ(kept(logits, params), all_ids(4));
  params.top_p = 1.0f;
  EXPECT_EQ(probs(logits, params), expected_probs(logits, 1.0f, all_ids(4)));
}

TEST_F(SamplerTest, TopPWorksOnTheTopKDistribution) {
  // Probabilities 1/2, 1/4, 1/8, 1/8. Top-k 2 renormalises to 2/3, 1/3: the
  // mass before token 1 is then 2/3 >= 0.6, so top-p keeps token 0 alone;
  // without top-k it is 1/2 < 0.6 and token 1 stays.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.125f),
                                     std::log(0.125f)};
  SamplingParams params = at_temperature(1.0f);
  params.top_p = 0.6f;
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{0, 1}));
  params.top_k = 2;
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{0}));
}

TEST_F(SamplerTest, MinPKeepsTokensWithinAFractionOfTheTop) {
  // Probabilities relative to the top: 1, 1/2, 1/5, 1/20.
  const std::vector<float> logits = {0.0f, std::log(0.5f), std::log(0.2f), std::log(0.05f)};
  SamplingParams params = at_temperature(1.0f);
  params.min_p = 0.1f;
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{0, 1, 2}));
  EXPECT_EQ(probs(logits, params), expected_probs(logits, 1.0f, {0, 1, 2}));
  params.min_p = 0.3f;
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{0, 1}));
  params.min_p = 1.0f;
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{0}));
  params.min_p = -0.0f;  // valid, and off like 0
  EXPECT_EQ(kept(logits, params), all_ids(4));
  // After temperature 2 the ratios are square roots: 1, 0.71, 0.45, 0.22.
  params.temperature = 2.0f;
  params.min_p = 0.3f;
  EXPECT_EQ(kept(logits, params), (std::set<TokenId>{0, 1, 2}));
}

// The kept set of top-k then top-p then min-p by a full sort, for rows large
// enough to take every selection path.
std::set<TokenId> reference_kept(const std::vector<float>& logits, const SamplingParams& params) {
  const std::size_t v = logits.size();
  std::vector<TokenId> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const float m = logits[order[0]];
  auto w = [&](TokenId id) { return softmax_weight(logits[id], m, params.temperature); };
  std::size_t n = v;
  if (params.top_k > 0) n = std::min(n, static_cast<std::size_t>(params.top_k));
  if (params.top_p < 1.0f) {
    double total = 0.0;
    if (n < v) {
      for (std::size_t j = 0; j < n; ++j) total += w(order[j]);
    } else {
      std::vector<float> weights(v);
      for (std::size_t i = 0; i < v; ++i) weights[i] = w(static_cast<TokenId>(i));
      total = sampler_math::lane_sum(weights);
    }
    double mass = 0.0;
    std::size_t j = 0;
    while (j < n && mass < params.top_p * total) mass += w(order[j++]);
    n = j;
  }
  std::set<TokenId> ids;
  for (std::size_t j = 0; j < n; ++j) {
    if (w(order[j]) > 0.0f && w(order[j]) >= params.min_p) ids.insert(order[j]);
  }
  return ids;
}

TEST_F(SamplerTest, EverySelectionPathMatchesAFullSort) {
  // Top-k up to 512 scans with a heap; larger k and top-p alone probe how
  // deep they reach, sort a small nucleus or partition a wide one, and give
  // a short list (up to 4096 tokens) or a dense row.
  struct Case {
    int top_k;
    float top_p;
    float min_p;
    float temperature;
  };
  const Case cases[] = {
      {1, 1.0f, 0.0f, 1.0f},     {5, 1.0f, 0.0f, 1.0f},     {512, 1.0f, 0.0f, 1.0f},
      {513, 1.0f, 0.0f, 1.0f},   {1000, 1.0f, 0.0f, 1.0f},  {4999, 1.0f, 0.0f, 1.0f},
      {0, 0.1f, 0.0f, 1.0f},     {0, 0.5f, 0.0f, 1.0f},     {0, 0.9f, 0.0f, 1.0f},
      {0, 0.99f, 0.0f, 3.0f},    {0, 0.999f, 0.0f, 50.0f},  {700, 0.9f, 0.0f, 2.0f},
      {40, 0.5f, 0.01f, 0.7f},   {0, 1.0f, 0.02f, 1.0f},    {0, 0.9f, 0.001f, 2.0f},
      {4500, 0.999f, 0.0f, 9.0f}, {4500, 1.0f, 0.0f, 0.1f}, {0, 0.95f, 0.0f, 0.05f},
  };
  // A flat row, and a peaked one: a few tokens far above a wide bulk.
  std::vector<float> peaked = random_logits(20000, 98, 8.0f);
  for (int i = 0; i < 6; ++i) peaked[static_cast<std::size_t>(i) * 3001] = 14.0f + 0.5f * i;
  for (const std::vector<float>& logits : {random_logits(5000, 99, 6.0f), peaked}) {
    for (const Case& c : cases) {
      SamplingParams params = at_temperature(c.temperature);
      params.top_k = c.top_k;
      params.top_p = c.top_p;
      params.min_p = c.min_p;
      const std::set<TokenId> want = reference_kept(logits, params);
      EXPECT_EQ(kept(logits, params), want)
          << logits.size() << ": " << c.top_k << " " << c.top_p << " " << c.min_p;
      EXPECT_EQ(probs(logits, params), expected_probs(logits, c.temperature, want));
    }
  }
}

// ---- logit bias and penalties -------------------------------------------------

TEST_F(SamplerTest, LogitBiasForcesAndBansTokens) {
  const std::vector<float> logits = {3.0f, 5.0f, 1.0f, 0.0f};
  SamplingParams params = greedy();
  params.logit_bias = {{3, 100.0f}};
  EXPECT_EQ(sample(logits, params), 3);
  params.temperature = 1.0f;
  SamplingRng rng = SamplingRng::from_seed(5);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(sample(logits, params, rng), 3);
  params.logit_bias = {{1, -100.0f}};
  params.temperature = 0.0f;
  EXPECT_EQ(sample(logits, params), 0);
  params.logit_bias = {{0, 0.5f}, {2, -0.25f}};
  params.temperature = 1.0f;
  EXPECT_EQ(probs(logits, params), expected_probs({3.5f, 5.0f, 0.75f, 0.0f}, 1.0f, all_ids(4)));
}

// min_tokens: the held-back tokens are at -inf until the output holds
// min_tokens tokens, whatever their bias; then they are as before.
TEST_F(SamplerTest, MinTokensHoldsBackItsTokensUntilTheOutputIsLongEnough) {
  const std::vector<float> logits = {3.0f, 5.0f, 1.0f, 0.0f};
  SamplingParams params = greedy();
  params.min_tokens = 2;
  params.held_back = {1, 3};
  params.logit_bias = {{3, 100.0f}};
  EXPECT_EQ(sample(logits, params), 0);
  output_.add(2);
  EXPECT_EQ(sample(logits, params), 0);
  params.temperature = 1.0f;
  EXPECT_EQ(probs(logits, params), expected_probs({3.0f, -kInf, 1.0f, -kInf}, 1.0f, {0, 2}));
  output_.add(2);  // two output tokens: nothing is held back
  EXPECT_EQ(probs(logits, params), expected_probs({3.0f, 5.0f, 1.0f, 100.0f}, 1.0f, all_ids(4)));
}

// The sampling op's adjustments say the same: a hold-back entry (-inf) per
// held token on the rows before min_tokens, merged with a bias of the same
// token, the proposals a row verifies counted as output.
TEST(LogitAdjustmentsTest, HoldBackIsMinusInfinityOnTheRowsBeforeMinTokens) {
  SamplingParams params;
  params.min_tokens = 3;
  params.held_back = {2, 7};
  params.logit_bias = {{7, 4.0f}, {9, 1.0f}};
  TokenCounts prompt, output;
  output.add(5);
  std::vector<LogitAdjustment> out;
  const std::vector<TokenId> draft = {4, 6};
  logit_adjustments(params, prompt, output, std::span(draft).first(1), out);  // row 1: two output tokens
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].token, 2);
  EXPECT_EQ(out[0].bias, -kInf);
  EXPECT_EQ(out[1].token, 7);
  EXPECT_EQ(out[1].bias, -kInf);
  EXPECT_EQ(out[2].token, 9);
  EXPECT_EQ(out[2].bias, 1.0f);
  logit_adjustments(params, prompt, output, draft, out);  // row 2: three output tokens
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].token, 7);
  EXPECT_EQ(out[0].bias, 4.0f);
}

TEST_F(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  const std::vector<float> logits = {2.0f, -1.0f, 1.5f, 0.5f, 3.0f};
  prompt_ = TokenCounts(std::vector<TokenId>{0, 0, 4});
  output_ = TokenCounts(std::vector<TokenId>{1, 1, 4});
  SamplingParams params = at_temperature(1.0f);
  params.repetition_penalty = 2.0f;
  // Prompt and output tokens alike, once each however often they occur
  // (token 4 is in both): 2 -> 1, -1 -> -2, 3 -> 1.5; 2 and 3 are untouched.
  const std::vector<float> processed = {1.0f, -2.0f, 1.5f, 0.5f, 1.5f};
  EXPECT_EQ(probs(logits, params), expected_probs(processed, 1.0f, all_ids(5)));
  params.temperature = 0.0f;
  EXPECT_EQ(sample(logits, params), 2);  // 4 was the argmax; now 2 and 4 tie at 1.5
  // Below 1 it encourages repeats.
  params.repetition_penalty = 0.5f;
  params.temperature = 1.0f;
  EXPECT_EQ(probs(logits, params),
            expected_probs({4.0f, -0.5f, 1.5f, 0.5f, 6.0f}, 1.0f, all_ids(5)));
}

TEST_F(SamplerTest, FrequencyAndPresencePenaltiesCountOutputTokensOnly) {
  const std::vector<float> logits = {2.0f, 1.0f, 1.5f, 0.0f};
  prompt_ = TokenCounts(std::vector<TokenId>{1, 1, 1});
  output_ = TokenCounts(std::vector<TokenId>{0, 2, 0, 0});
  SamplingParams params = at_temperature(1.0f);
  params.frequency_penalty = 0.5f;
  EXPECT_EQ(probs(logits, params),
            expected_probs({2.0f - 1.5f, 1.0f, 1.5f - 0.5f, 0.0f}, 1.0f, all_ids(4)));
  params.frequency_penalty = 0.0f;
  params.presence_penalty = 0.25f;
  EXPECT_EQ(probs(logits, params),
            expected_probs({1.75f, 1.0f, 1.25f, 0.0f}, 1.0f, all_ids(4)));
  params.frequency_penalty = 0.5f;
  params.presence_penalty = -1.0f;  // negative values encourage repeats
  EXPECT_EQ(probs(logits, params), expected_probs({1.5f, 1.0f, 2.0f, 0.0f}, 1.0f, all_ids(4)));
  params.temperature = 0.0f;
  EXPECT_EQ(sample(logits, params), 2);
}

TEST_F(SamplerTest, LogitBiasComesBeforePenaltiesAndPenaltiesBeforeTemperature) {
  // Bias first: (1 + 1) / 2 = 1, not 1 / 2 + 1 = 1.5. Then T = 0.5.
  const std::vector<float> logits = {1.0f, 0.5f};
  output_ = TokenCounts(std::vector<TokenId>{0});
  SamplingParams params = at_temperature(0.5f);
  params.logit_bias = {{0, 1.0f}};
  params.repetition_penalty = 2.0f;
  EXPECT_EQ(probs(logits, params), expected_probs({1.0f, 0.5f}, 0.5f, all_ids(2)));
}

// ---- seeds and the draw ------------------------------------------------------

TEST(SamplingRngTest, IsSplitMix64) {
  // The published first outputs of SplitMix64 from state 0.
  SamplingRng rng = SamplingRng::from_state(0);
  EXPECT_EQ(rng.next_u64(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next_u64(), 0x6E789E6AA1B965F4ull);
  SamplingRng copy = rng;
  EXPECT_EQ(rng.uniform(), static_cast<double>(copy.next_u64() >> 11) / 9007199254740992.0);
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(SamplingRngTest, SeedsAndCountersGiveDistinctRepeatableStreams) {
  EXPECT_EQ(SamplingRng::for_request(42, 7), SamplingRng::from_seed(42));
  EXPECT_EQ(SamplingRng::for_request(42, 7), SamplingRng::for_request(42, 8));
  EXPECT_EQ(SamplingRng::for_request(std::nullopt, 7), SamplingRng::for_request(std::nullopt, 7));
  EXPECT_NE(SamplingRng::for_request(std::nullopt, 7), SamplingRng::for_request(std::nullopt, 8));
  EXPECT_NE(SamplingRng::from_seed(0), SamplingRng::from_seed(1));
  SamplingRng a = SamplingRng::from_seed(-1);
  SamplingRng b = SamplingRng::from_state(a.state());
  EXPECT_EQ(a.next_u64(), b.next_u64());
}

std::vector<TokenId> draw_sequence(Sampler& sampler, std::int64_t seed, int n) {
  const std::vector<float> logits = {0.3f, 1.1f, -0.4f, 0.9f, 0.0f, 1.0f, -1.0f, 0.6f};
  SamplingParams params = at_temperature(1.0f);
  params.seed = seed;
  SamplingRng rng = SamplingRng::for_request(params.seed, 0);
  std::vector<TokenId> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(sampler.sample(logits, params, {}, {}, rng).token);
  return tokens;
}

TEST_F(SamplerTest, SameSeedSameChoicesOtherSeedOtherChoices) {
  Sampler other;
  EXPECT_EQ(draw_sequence(sampler_, 1234, 200), draw_sequence(other, 1234, 200));
  EXPECT_NE(draw_sequence(sampler_, 1234, 200), draw_sequence(sampler_, 1235, 200));
  // Pinned: SplitMix64 and the uniform are integer arithmetic, so these are
  // the draws on every platform. A change here breaks users' seeded outputs.
  EXPECT_EQ(draw_sequence(sampler_, 1234, 12),
            (std::vector<TokenId>{3, 4, 0, 5, 1, 1, 0, 7, 3, 3, 1, 0}));
}

TEST_F(SamplerTest, EveryNonGreedyCallDrawsExactlyOneUniform) {
  const std::vector<float> logits = random_logits(300, 5, 3.0f);
  SamplingParams params = at_temperature(0.8f);
  params.top_k = 1;
  SamplingRng rng = SamplingRng::from_seed(9);
  SamplingRng shadow = rng;
  sample(logits, params, rng);
  shadow.next_u64();
  EXPECT_EQ(rng, shadow);
  params.top_k = 0;
  params.top_p = 0.5f;
  sample(logits, params, rng);
  shadow.next_u64();
  EXPECT_EQ(rng, shadow);
}

TEST_F(SamplerTest, SampleEqualsSampleFromProcessedProbs) {
  Sampler other;
  std::vector<float> p;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    const std::vector<float> logits = random_logits(1 + seed % 700, seed, 4.0f);
    SamplingParams params = at_temperature(0.25f + static_cast<float>(seed % 7) * 0.3f);
    params.top_k = static_cast<int>(seed % 5 == 0 ? 0 : seed % 50);
    params.top_p = seed % 3 == 0 ? 1.0f : 0.5f + static_cast<float>(seed % 5) * 0.1f;
    params.min_p = seed % 4 == 0 ? 0.05f : 0.0f;
    params.repetition_penalty = seed % 2 == 0 ? 1.3f : 1.0f;
    params.frequency_penalty = seed % 6 == 0 ? 0.4f : 0.0f;
    output_ = TokenCounts(std::vector<TokenId>{0, 0, static_cast<TokenId>(logits.size() / 2)});
    SamplingRng a = SamplingRng::from_seed(static_cast<std::int64_t>(seed));
    SamplingRng b = a;
    p.assign(logits.size(), 0.0f);
    other.processed_probs(logits, params, prompt_, output_, p);
    EXPECT_EQ(sample(logits, params, a), Sampler::sample_from(p, b)) << seed;
    EXPECT_EQ(a, b);
  }
}

TEST(SampleFromTest, DrawsFromAGivenDistribution) {
  SamplingRng rng = SamplingRng::from_seed(1);
  const std::vector<float> one_hot = {0.0f, 0.0f, 1.0f, 0.0f};
  for (int i = 0; i < 100; ++i) ASSERT_EQ(Sampler::sample_from(one_hot, rng), 2);
  // Unnormalised, with negative and NaN weights counting as zero.
  const std::vector<float> weights = {-1.0f, 3.0f, kNaN, 0.0f, 3.0f};
  std::set<TokenId> seen;
  for (int i = 0; i < 200; ++i) seen.insert(Sampler::sample_from(weights, rng));
  EXPECT_EQ(seen, (std::set<TokenId>{1, 4}));
  EXPECT_THROW(Sampler::sample_from(std::vector<float>{0.0f, 0.0f}, rng), Error);
}

// Pearson's chi-squared statistic of draw counts against probabilities.
double chi_squared(const std::vector<int>& counts, const std::vector<double>& probs, int draws) {
  double stat = 0.0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * draws;
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return stat;
}

TEST_F(SamplerTest, DrawsAtTemperatureOneMatchTheSoftmax) {
  // 100,000 draws over 6 tokens, fixed seed; the threshold is the chi-squared
  // quantile with 5 degrees of freedom at p = 1e-6 (35.888), so a correct
  // sampler fails it with another seed only once in a million.
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 2.0f};
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  std::vector<double> softmax;
  for (float l : logits) softmax.push_back(std::exp(static_cast<double>(l)) / z);
  constexpr int kDraws = 100000;
  constexpr double kChiSquared5DofP1e6 = 35.888;

  SamplingRng rng = SamplingRng::from_seed(20240601);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[sample(logits, at_temperature(1.0f), rng)];
  EXPECT_LT(chi_squared(counts, softmax, kDraws), kChiSquared5DofP1e6);

  // The same through processed_probs and sample_from, with top-k 4 and T 0.7:
  // the distribution is the top-4 softmax of logits / 0.7.
  SamplingParams params = at_temperature(0.7f);
  params.top_k = 4;
  const std::vector<float> p = probs(logits, params);
  std::vector<double> want(logits.size(), 0.0);
  double z4 = 0.0;
  for (int id : {0, 1, 2, 5}) z4 += std::exp(logits[id] / 0.7);
  for (int id : {0, 1, 2, 5}) want[id] = std::exp(logits[id] / 0.7) / z4;
  std::fill(counts.begin(), counts.end(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[Sampler::sample_from(p, rng)];
  EXPECT_EQ(counts[3], 0);
  EXPECT_EQ(counts[4], 0);
  const std::vector<int> kept_counts = {counts[0], counts[1], counts[2], counts[5]};
  const std::vector<double> kept_want = {want[0], want[1], want[2], want[5]};
  constexpr double kChiSquared3DofP1e6 = 30.665;
  EXPECT_LT(chi_squared(kept_counts, kept_want, kDraws), kChiSquared3DofP1e6);
}

// ---- logprobs ----------------------------------------------------------------

TEST_F(SamplerTest, LogprobsAreTheRawLogSoftmax) {
  SamplingParams params = greedy();
  params.logprobs = 2;
  SamplingRng rng = SamplingRng::from_seed(0);
  const SampledToken flat = sampler_.sample(std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}, params,
                                            prompt_, output_, rng);
  const float log_quarter = static_cast<float>(-std::log(4.0));
  EXPECT_EQ(flat.token, 0);
  EXPECT_EQ(flat.logprob, log_quarter);
  ASSERT_EQ(flat.top_logprobs().size(), 2u);
  EXPECT_EQ(flat.top_logprobs()[0], (TokenLogprob{0, log_quarter}));
  EXPECT_EQ(flat.top_logprobs()[1], (TokenLogprob{1, log_quarter}));

  // {1, 2, 3}: log_softmax_i = (l_i - 3) - log(e^-2 + e^-1 + 1), the
  // exponentials as softmax_exp and the sum as its lanes add up.
  const double log_z =
      std::log((double{softmax_exp(-2.0f)} + double{softmax_exp(-1.0f)}) + 1.0);
  EXPECT_NEAR(log_z, std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0), 1e-7);
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  params.logprobs = 3;
  const SampledToken r = sampler_.sample(logits, params, prompt_, output_, rng);
  EXPECT_EQ(r.token, 2);
  EXPECT_EQ(r.logprob, static_cast<float>(0.0 - log_z));
  ASSERT_EQ(r.num_top, 3);
  EXPECT_EQ(r.top[0], (TokenLogprob{2, static_cast<float>(0.0 - log_z)}));
  EXPECT_EQ(r.top[1], (TokenLogprob{1, static_cast<float>(-1.0 - log_z)}));
  EXPECT_EQ(r.top[2], (TokenLogprob{0, static_cast<float>(-2.0 - log_z)}));
}

TEST_F(SamplerTest, LogprobsIgnoreBiasPenaltiesAndTemperature) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const double log_z =
      std::log((double{softmax_exp(-2.0f)} + double{softmax_exp(-1.0f)}) + 1.0);
  output_ = TokenCounts(std::vector<TokenId>{2});
  SamplingParams params = at_temperature(0.3f);
  params.logit_bias = {{0, 100.0f}};
  params.repetition_penalty = 1.5f;
  params.presence_penalty = 1.0f;
  params.logprobs = 1;
  SamplingRng rng = SamplingRng::from_seed(0);
  const SampledToken r = sampler_.sample(logits, params, prompt_, output_, rng);
  EXPECT_EQ(r.token, 0);  // forced by the bias
  EXPECT_EQ(r.logprob, static_cast<float>(-2.0 - log_z));
  ASSERT_EQ(r.num_top, 1);
  EXPECT_EQ(r.top[0], (TokenLogprob{2, static_cast<float>(0.0 - log_z)}));
}

TEST_F(SamplerTest, TopLogprobsAreOrderedWithTiesToTheLowerId) {
  SamplingParams params = at_temperature(1.0f);
  SamplingRng rng = SamplingRng::from_seed(4);
  // Without the field: none. Zero: the chosen token's only.
  SampledToken r = sampler_.sample(std::vector<float>{1.0f, 3.0f}, params, prompt_, output_, rng);
  EXPECT_FALSE(r.logprob.has_value());
  EXPECT_EQ(r.num_top, 0);
  params.logprobs = 0;
  r = sampler_.sample(std::vector<float>{1.0f, 3.0f}, params, prompt_, output_, rng);
  EXPECT_TRUE(r.logprob.has_value());
  EXPECT_EQ(r.num_top, 0);

  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 2.0f, 0.0f, kNaN};
  params.logprobs = 4;
  r = sampler_.sample(logits, params, prompt_, output_, rng);
  ASSERT_EQ(r.num_top, 4);
  const std::vector<TokenId> ids = {r.top[0].token, r.top[1].token, r.top[2].token, r.top[3].token};
  EXPECT_EQ(ids, (std::vector<TokenId>{1, 3, 2, 4}));
  EXPECT_EQ(r.top[0].logprob, r.top[1].logprob);
  EXPECT_GT(r.top[1].logprob, r.top[2].logprob);
  for (const TokenLogprob& t : r.top_logprobs()) {
    if (t.token == r.token) {
      EXPECT_EQ(t.logprob, r.logprob);
    }
  }
  // More than the vocabulary: every token, NaN last as -inf.
  params.logprobs = 20;
  r = sampler_.sample(logits, params, prompt_, output_, rng);
  ASSERT_EQ(r.num_top, 7);
  EXPECT_EQ(r.top[6].token, 6);
  EXPECT_EQ(r.top[6].logprob, -kInf);
}

// ---- odd rows and misuse ----------------------------------------------------

TEST_F(SamplerTest, NaNNeverWinsAndAnEmptyRowIsAnError) {
  const std::vector<float> logits = {kNaN, 1.0f, kNaN, 0.0f, -kInf};
  EXPECT_EQ(sample(logits, greedy()), 1);
  SamplingRng rng = SamplingRng::from_seed(2);
  for (int i = 0; i < 200; ++i) {
    const TokenId t = sample(logits, at_temperature(1.5f), rng);
    ASSERT_TRUE(t == 1 || t == 3) << t;
  }
  SamplingParams top = at_temperature(1.0f);
  top.top_k = 3;
  top.top_p = 0.99f;
  EXPECT_EQ(kept(logits, top), (std::set<TokenId>{1, 3}));

  const std::vector<float> dead = {-kInf, kNaN};
  try {
    sample(dead, at_temperature(1.0f));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("top logit of the row is -inf"));
  }
  EXPECT_THROW(sample(dead, greedy()), Error);
  EXPECT_THROW(sample({}, greedy()), Error);
}

TEST_F(SamplerTest, TokensOutsideTheRowAreErrors) {
  SamplingParams params = greedy();
  params.logit_bias = {{4, 1.0f}};
  try {
    sample({1.0f, 2.0f}, params);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "logit_bias names token 4, outside this row of 2 logits; the request's tokens must "
              "come from the model's own vocabulary");
  }
  output_ = TokenCounts(std::vector<TokenId>{9});
  params = greedy();
  params.frequency_penalty = 1.0f;
  EXPECT_THROW(sample({1.0f, 2.0f}, params), Error);
  std::vector<float> short_row(1);
  EXPECT_THROW(sampler_.processed_probs(std::vector<float>{1.0f, 2.0f}, greedy(), prompt_, output_,
                                        short_row),
               Error);
}

TEST_F(SamplerTest, ScratchIsReusedAcrossVocabularySizes) {
  // One Sampler serves rows of any size in turn, large then small then large.
  SamplingParams params = at_temperature(1.0f);
  params.top_p = 0.9f;
  for (std::size_t v : {50000u, 3u, 20000u, 1u}) {
    const std::vector<float> logits = random_logits(v, v, 5.0f);
    EXPECT_EQ(kept(logits, params), reference_kept(logits, params)) << v;
  }
}

// ---- TokenCounts -------------------------------------------------------------

TEST(TokenCountsTest, CountsAddsAndRemovals) {
  TokenCounts counts(std::vector<TokenId>{5, 7, 5, 9});
  EXPECT_EQ(counts.count(5), 2);
  EXPECT_EQ(counts.count(7), 1);
  EXPECT_EQ(counts.count(8), 0);
  EXPECT_EQ(counts.num_distinct(), 3);
  EXPECT_EQ(counts.num_tokens(), 4);
  counts.remove(7);  // swap-removes the middle entry; 9 must stay findable
  EXPECT_FALSE(counts.contains(7));
  EXPECT_EQ(counts.count(9), 1);
  counts.add(9);
  EXPECT_EQ(counts.count(9), 2);
  counts.remove(5);
  EXPECT_EQ(counts.count(5), 1);
  EXPECT_EQ(counts.num_distinct(), 2);
  EXPECT_EQ(counts.num_tokens(), 3);
  int total = 0;
  for (const TokenCounts::Entry& e : counts.entries()) total += e.count;
  EXPECT_EQ(total, 3);
  EXPECT_THROW(counts.remove(7), Error);
  counts.clear();
  EXPECT_EQ(counts.num_distinct(), 0);
  EXPECT_EQ(counts.num_tokens(), 0);
  EXPECT_EQ(counts.count(9), 0);
}

// ---- validation ----------------------------------------------------------------

std::string invalid(const SamplingParams& p, std::int64_t vocab_size = 1000) {
  const std::optional<InvalidParam> problem = p.validate(vocab_size);
  return problem ? problem->message : "(valid)";
}

TEST(SamplingParamsTest, DefaultsAndEdgesAreValid) {
  EXPECT_EQ(SamplingParams{}.validate(1000), std::nullopt);
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = -1;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {999, 100.0f}};
  p.logprobs = 20;
  p.max_tokens = 1;
  p.stop = {"\n\n"};
  p.stop_token_ids = {999};
  p.n = 128;
  EXPECT_EQ(p.validate(1000), std::nullopt);
}

TEST(SamplingParamsTest, MessagesNameTheParameterTheValueAndTheRange) {
  SamplingParams p;
  p.temperature = -0.5f;
  EXPECT_EQ(invalid(p),
            "temperature = -0.5 is out of range: it must be a finite number >= 0 (0 means greedy, "
            "1 the model's own distribution)");
  p = {};
  p.temperature = kNaN;
  EXPECT_THAT(invalid(p), HasSubstr("temperature = nan is out of range"));
  p = {};
  p.top_k = -2;
  EXPECT_EQ(invalid(p),
            "top_k = -2 is out of range: it must be >= 1, or 0 or -1 to turn top-k off");
  p = {};
  p.top_p = 0.0f;
  EXPECT_EQ(invalid(p), "top_p = 0 is out of range: it must be in (0, 1] (1 turns top-p off)");
  p.top_p = 1.5f;
  EXPECT_EQ(invalid(p), "top_p = 1.5 is out of range: it must be in (0, 1] (1 turns top-p off)");
  p = {};
  p.min_p = -0.1f;
  EXPECT_EQ(invalid(p), "min_p = -0.1 is out of range: it must be in [0, 1] (0 turns min-p off)");
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_THAT(invalid(p), HasSubstr("repetition_penalty = 0 is out of range: it must be a finite "
                                    "number > 0"));
  p = {};
  p.presence_penalty = 2.5f;
  EXPECT_EQ(invalid(p),
            "presence_penalty = 2.5 is out of range: it must be in [-2, 2] (0 turns it off)");
  p = {};
  p.frequency_penalty = -3.0f;
  EXPECT_EQ(invalid(p),
            "frequency_penalty = -3 is out of range: it must be in [-2, 2] (0 turns it off)");
  p = {};
  p.logit_bias = {{1000, 1.0f}};
  EXPECT_EQ(invalid(p),
            "logit_bias names token 1000, which is not in the vocabulary: token ids must be in "
            "[0, 999]");
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THAT(invalid(p), HasSubstr("logit_bias names token -1"));
  p.logit_bias = {{3, 101.0f}};
  EXPECT_EQ(invalid(p), "logit_bias for token 3 = 101 is out of range: it must be in [-100, 100]");
  p = {};
  p.logprobs = 21;
  EXPECT_EQ(invalid(p),
            "logprobs = 21 is out of range: it must be in [0, 20] (0 returns only the chosen "
            "token's logprob)");
  p.logprobs = -1;
  EXPECT_THAT(invalid(p), HasSubstr("logprobs = -1 is out of range"));
  p = {};
  p.max_tokens = 0;
  EXPECT_EQ(invalid(p),
            "max_tokens = 0 is out of range: it must be >= 1, or left out to generate until the "
            "context is full");
  p = {};
  p.stop = {"end", ""};
  EXPECT_EQ(invalid(p),
            "stop[1] is an empty string: every stop string needs at least one character; remove "
            "it");
  p = {};
  p.stop_token_ids = {5, 1000};
  EXPECT_EQ(invalid(p),
            "stop_token_ids contains 1000, which is not in the vocabulary: token ids must be in "
            "[0, 999]");
  p = {};
  p.n = 0;
  EXPECT_EQ(invalid(p), "n = 0 is out of range: it must be in [1, 128]");
  p.n = 129;
  EXPECT_EQ(invalid(p), "n = 129 is out of range: it must be in [1, 128]");
}

}  // namespace
}  // namespace folio
