// sampler_math against plain scalar references: softmax_exp against double
// std::exp, and the vectorised row loops against one-element-at-a-time loops
// over every length 0..40 (all tail sizes) and odd values (NaN, +-inf, -0).
#include "backend/sampling/sampler_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/sampling/sampling_rng.h"

namespace folio::sampler_math {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// |got - want| in units in the last place of want (a float).
double ulps(float got, double want) {
  const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

TEST(SamplerMathTest, SoftmaxExpIsWithinTwoUlpsOfExp) {
  double worst = 0.0;
  for (int i = 0; i <= 870000; ++i) {
    const float x = -static_cast<float>(i) * 1e-4f;
    worst = std::max(worst, ulps(softmax_exp(x), std::exp(static_cast<double>(x))));
  }
  SamplingRng rng = SamplingRng::from_seed(1);
  for (int i = 0; i < 200000; ++i) {
    const auto x = static_cast<float>(-87.0 * rng.uniform());
    worst = std::max(worst, ulps(softmax_exp(x), std::exp(static_cast<double>(x))));
  }
  EXPECT_LT(worst, 2.0);
}

TEST(SamplerMathTest, SoftmaxExpEdges) {
  EXPECT_EQ(softmax_exp(0.0f), 1.0f);
  EXPECT_EQ(softmax_exp(-0.0f), 1.0f);
  EXPECT_EQ(softmax_exp(-kInf), 0.0f);
  EXPECT_EQ(softmax_exp(kNaN), 0.0f);
  EXPECT_EQ(softmax_exp(-kNaN), 0.0f);
  EXPECT_EQ(softmax_exp(-87.0001f), 0.0f);
  EXPECT_EQ(softmax_exp(-1000.0f), 0.0f);
  EXPECT_GT(softmax_exp(kExpMin), 0.0f);
  EXPECT_LT(ulps(softmax_exp(kExpMin), std::exp(-87.0)), 2.0);
  // The weight of the top logit is exactly 1 at any temperature.
  EXPECT_EQ(softmax_weight(3.5f, 3.5f, 0.01f), 1.0f);
  EXPECT_EQ(softmax_weight(3.5f, 3.5f, 1e6f), 1.0f);
}

TEST(SamplerMathTest, IsPositiveFinite) {
  EXPECT_TRUE(is_positive_finite(1.0f));
  EXPECT_TRUE(is_positive_finite(std::numeric_limits<float>::denorm_min()));
  EXPECT_TRUE(is_positive_finite(std::numeric_limits<float>::max()));
  EXPECT_FALSE(is_positive_finite(0.0f));
  EXPECT_FALSE(is_positive_finite(-0.0f));
  EXPECT_FALSE(is_positive_finite(-1.0f));
  EXPECT_FALSE(is_positive_finite(kInf));
  EXPECT_FALSE(is_positive_finite(kNaN));
  EXPECT_FALSE(is_positive_finite(-kNaN));
}

// Rows of every length up to 40 with odd values mixed in.
std::vector<std::vector<float>> test_rows() {
  std::vector<std::vector<float>> rows;
  SamplingRng rng = SamplingRng::from_seed(17);
  const float odd[] = {kNaN, -kInf, -0.0f, 0.0f, kInf, 1e-40f, -1e30f};
  for (std::size_t n = 0; n <= 40; ++n) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<float> row(n);
      for (float& x : row) x = static_cast<float>(rng.uniform() * 20.0 - 10.0);
      if (n > 0 && variant >= 1) row[rng.next_u64() % n] = odd[rng.next_u64() % 7];
      if (n > 0 && variant >= 2) row[rng.next_u64() % n] = odd[rng.next_u64() % 7];
      if (variant == 3) {
        for (float& x : row) x = rng.next_u64() % 2 ? kNaN : -kInf;
      }
      rows.push_back(row);
    }
  }
  return rows;
}

TEST(SamplerMathTest, MaxLogitMatchesAScalarLoop) {
  for (const std::vector<float>& row : test_rows()) {
    float want = -kInf;
    for (float x : row) {
      if (!std::isnan(x) && x > want) want = x;
    }
    const float got = max_logit(row);
    EXPECT_EQ(std::signbit(got) && got == 0.0f, std::signbit(want) && want == 0.0f);
    EXPECT_EQ(got, want) << row.size();
  }
  EXPECT_EQ(max_logit(std::vector<float>{-0.0f, 0.0f, -1.0f}), 0.0f);
  EXPECT_EQ(max_logit(std::vector<float>{-3.0f, -2.5f, kNaN, -7.0f, -2.75f, -9, -9, -9, -9, -2.6f}),
            -2.5f);
}

TEST(SamplerMathTest, WeightsMatchAScalarLoop) {
  for (const std::vector<float>& row : test_rows()) {
    const float m = max_logit(row);
    if (!std::isfinite(m)) continue;
    for (float min_weight : {0.0f, -0.0f, 0.01f, 0.5f, 1.0f}) {
      std::vector<float> got(row.size(), -1.0f);
      softmax_weights(row, m, 0.7f, min_weight, got);
      for (std::size_t i = 0; i < row.size(); ++i) {
        const float w = softmax_weight(row[i], m, 0.7f);
        EXPECT_EQ(got[i], w >= min_weight ? w : 0.0f) << row.size() << " " << i;
      }
    }
  }
}

TEST(SamplerMathTest, LaneSumIsTheSameDenseOrSparse) {
  SamplingRng rng = SamplingRng::from_seed(3);
  for (std::size_t n = 0; n <= 100; ++n) {
    std::vector<float> row(n, 0.0f);
    LaneSum sparse;
    double sequential = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      if (rng.next_u64() % 3 == 0) continue;  // leave a zero
      row[i] = static_cast<float>(rng.uniform());
      sparse.add(static_cast<std::int64_t>(i), row[i]);
      sequential += row[i];
    }
    EXPECT_EQ(lane_sum(row), sparse.total()) << n;
    EXPECT_NEAR(lane_sum(row), sequential, 1e-12) << n;
  }
  // Lane by lane: eight values in eight lanes, combined pairwise.
  const std::vector<float> eight = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(lane_sum(eight), 36.0);
  // NaN, infinities, negatives and zeros count as nothing.
  EXPECT_EQ(lane_sum(std::vector<float>{0.5f, kNaN, -1.0f, kInf, 0.25f, -0.0f, -kInf, 0.0f, 2.0f}),
            2.75);
}

TEST(SamplerMathTest, ExpSumIsTheLaneSumOfExps) {
  for (const std::vector<float>& row : test_rows()) {
    const float m = max_logit(row);
    if (!std::isfinite(m)) continue;
    std::vector<float> exps(row.size());
    for (std::size_t i = 0; i < row.size(); ++i) exps[i] = softmax_exp(row[i] - m);
    EXPECT_EQ(exp_sum(row, m), lane_sum(exps)) << row.size();
  }
}

TEST(SamplerMathTest, Divide) {
  std::vector<float> v = {1.0f, 3.0f, 0.0f, 0.75f, 9.0f};
  divide(v, 3.0f);
  EXPECT_EQ(v, (std::vector<float>{1.0f / 3.0f, 1.0f, 0.0f, 0.25f, 3.0f}));
}

}  // namespace
}  // namespace folio::sampler_math
