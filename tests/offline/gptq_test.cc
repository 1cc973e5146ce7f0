// GPTQ on synthetic weights and inputs: with uncorrelated inputs it is the
// block-by-block weighted encoder exactly (no error to spread; Q8_0 aside,
// whose encoder does not always round to the nearest level), with
// correlated ones its output error is well below that encoder's, and inputs
// that never fire or types without codes are handled.
#include "offline/gptq.h"
#include "offline/linalg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

constexpr std::int64_t kRows = 24;
constexpr std::int64_t kCols = 512;  // two 256-element blocks, sixteen 32-element ones

std::vector<float> normal_matrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> m(static_cast<std::size_t>(rows * cols));
  for (float& v : m) v = normal(rng);
  return m;
}

// Calibration-like inputs: a few shared directions (as activations have),
// noise, and a handful of channels ten times larger than the rest.
std::vector<float> correlated_inputs(std::int64_t tokens, unsigned seed) {
  constexpr int kDirections = 6;
  const std::vector<float> basis = normal_matrix(kDirections, kCols, seed);
  const std::vector<float> u = normal_matrix(tokens, kDirections, seed + 1);
  std::vector<float> x = normal_matrix(tokens, kCols, seed + 2);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t j = 0; j < kCols; ++j) {
      float v = 0.3f * x[static_cast<std::size_t>(t * kCols + j)];
      for (int d = 0; d < kDirections; ++d)
        v += u[static_cast<std::size_t>(t * kDirections + d)] * basis[static_cast<std::size_t>(d * kCols + j)];
      x[static_cast<std::size_t>(t * kCols + j)] = j % 97 == 5 ? 10.0f * v : v;
    }
  return x;
}

std::vector<float> decode(DType type, const std::vector<std::uint8_t>& q) {
  std::vector<float> y(static_cast<std::size_t>(kRows * kCols));
  const auto row = static_cast<std::size_t>(row_bytes(type, kCols));
  for (std::int64_t r = 0; r < kRows; ++r)
    dequantize_row(type, q.data() + static_cast<std::size_t>(r) * row, y.data() + static_cast<std::size_t>(r * kCols), kCols);
  return y;
}

// sum over rows of d^T H d, d = w - decoded: the output's squared error over
// the calibration inputs.
double output_error(const std::vector<float>& w, const std::vector<float>& y, const InputCovariance& h) {
  double total = 0.0;
  std::vector<double> d(static_cast<std::size_t>(kCols));
  for (std::int64_t r = 0; r < kRows; ++r) {
    for (std::int64_t j = 0; j < kCols; ++j)
      d[static_cast<std::size_t>(j)] = static_cast<double>(w[static_cast<std::size_t>(r * kCols + j)]) -
                                       static_cast<double>(y[static_cast<std::size_t>(r * kCols + j)]);
    for (std::int64_t i = 0; i < kCols; ++i)
      for (std::int64_t j = 0; j < kCols; ++j) {
        const std::size_t ij = static_cast<std::size_t>(std::min(i, j) * kCols + std::max(i, j));  // upper triangle
        total += d[static_cast<std::size_t>(i)] * static_cast<double>(h.sum[ij]) * d[static_cast<std::size_t>(j)];
      }
  }
  return total;
}

// The weighted encoder row by row, importance = the covariance's diagonal.
std::vector<std::uint8_t> block_by_block(DType type, const std::vector<float>& w, const InputCovariance& h) {
  std::vector<float> importance(static_cast<std::size_t>(kCols));
  const float inv_rows = 1.0f / static_cast<float>(h.rows);
  for (std::int64_t j = 0; j < kCols; ++j) importance[static_cast<std::size_t>(j)] = h.sum[static_cast<std::size_t>(j * kCols + j)] * inv_rows;
  const auto row = static_cast<std::size_t>(row_bytes(type, kCols));
  std::vector<std::uint8_t> q(static_cast<std::size_t>(kRows) * row);
  for (std::int64_t r = 0; r < kRows; ++r)
    quantize_row_weighted(type, w.data() + static_cast<std::size_t>(r * kCols), importance.data(),
                          q.data() + static_cast<std::size_t>(r) * row, kCols);
  return q;
}

std::vector<std::uint8_t> gptq(DType type, std::vector<float> w, const InputCovariance& h) {
  ThreadPool pool(2);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(kRows * row_bytes(type, kCols)));
  gptq_quantize(type, w.data(), kRows, kCols, h, q.data(), pool);
  return q;
}

class GptqTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!linalg::available()) GTEST_SKIP() << "built without OpenBLAS";
  }
};

TEST_P(GptqTest, WithUncorrelatedInputsIsTheBlockEncoder) {
  const DType type = GetParam();
  const std::vector<float> w = normal_matrix(kRows, kCols, 1);
  InputCovariance h;
  h.cols = kCols;
  h.rows = 1;
  h.sum.assign(static_cast<std::size_t>(kCols * kCols), 0.0f);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> scale(0.1f, 4.0f);
  for (std::int64_t j = 0; j < kCols; ++j) h.sum[static_cast<std::size_t>(j * kCols + j)] = scale(rng);
  const std::vector<std::uint8_t> ours = gptq(type, w, h), blocks = block_by_block(type, w, h);
  if (type == DType::Q8_0) {
    // gguf's Q8_0 rounds x / d with d before its f16 rounding, not always
    // to the nearest stored level; GPTQ takes the nearest under the same scales.
    EXPECT_LE(output_error(w, decode(type, ours), h), output_error(w, decode(type, blocks), h));
  } else {
    EXPECT_EQ(ours, blocks);
  }
}

TEST_P(GptqTest, CorrelatedInputsLoseLessOutputThanTheBlockEncoder) {
  const DType type = GetParam();
  const std::vector<float> w = normal_matrix(kRows, kCols, 3);
  const std::vector<float> x = correlated_inputs(2048, 4);
  InputCovariance h;
  h.cols = kCols;
  accumulate_covariance(h, x.data(), 1024);
  accumulate_covariance(h, x.data() + 1024 * kCols, 1024);
  EXPECT_EQ(h.rows, 2048);
  const double blocks = output_error(w, decode(type, block_by_block(type, w, h)), h);
  const double ours = output_error(w, decode(type, gptq(type, w, h)), h);
  EXPECT_TRUE(std::isfinite(ours));
  EXPECT_LT(ours, 0.7 * blocks) << "GPTQ " << ours << ", block by block " << blocks;
}

TEST_P(GptqTest, InputsThatNeverFireGetZeroWeights) {
  const DType type = GetParam();
  const std::vector<float> w = normal_matrix(kRows, kCols, 5);
  std::vector<float> x = correlated_inputs(512, 6);
  for (std::int64_t t = 0; t < 512; ++t) x[static_cast<std::size_t>(t * kCols + 40)] = 0.0f;
  InputCovariance h;
  h.cols = kCols;
  accumulate_covariance(h, x.data(), 512);
  const std::vector<float> y = decode(type, gptq(type, w, h));
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  const double blocks = output_error(w, decode(type, block_by_block(type, w, h)), h);
  EXPECT_LT(output_error(w, y, h), blocks);
}

INSTANTIATE_TEST_SUITE_P(Types, GptqTest,
                         ::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::Q3_K,
                                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS,
                                           DType::MXFP4, DType::NVFP4),
                         [](const auto& p) { return std::string(name(p.param)); });

TEST(Gptq, RefusesTypesWithoutCodes) {
  if (!linalg::available()) GTEST_SKIP() << "built without OpenBLAS";
  std::vector<float> w = normal_matrix(kRows, kCols, 7);
  InputCovariance h;
  h.cols = kCols;
  accumulate_covariance(h, w.data(), kRows);
  ThreadPool pool(1);
  std::vector<std::uint8_t> q(static_cast<std::size_t>(kRows * row_bytes(DType::F16, kCols)));
  EXPECT_THROW(gptq_quantize(DType::F16, w.data(), kRows, kCols, h, q.data(), pool), Error);
}

}  // namespace
}  // namespace folio
