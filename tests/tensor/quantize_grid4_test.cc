// The 4-bit grid types (IQ4_NL, IQ4_XS, MXFP4, NVFP4): hand-made blocks
// decoded, the scale byte formats, round-trip error against Q4_0's, the
// importance-weighted search, and refusals. The bit-for-bit comparison with
// the gguf package is tests/python/test_quants.py.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "tensor/dtype.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

constexpr DType kGridTypes[] = {DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4, DType::NVFP4};

template <typename Block>
std::vector<float> decode(DType type, const Block& block) {
  std::vector<float> out(static_cast<std::size_t>(info(type).block_elems));
  dequantize_row(type, &block, out.data(), static_cast<std::int64_t>(out.size()));
  return out;
}

std::vector<float> gaussian(std::size_t n, unsigned seed, float outlier_share = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng) * (unit(rng) < outlier_share ? 10.0f : 1.0f);
  return x;
}

std::vector<float> round_trip(DType type, const std::vector<float>& x, std::int64_t row_len,
                              const std::vector<float>* importance = nullptr) {
  std::vector<char> q(static_cast<std::size_t>(row_bytes(type, row_len)));
  std::vector<float> y(x.size());
  for (std::size_t r = 0; r < x.size(); r += static_cast<std::size_t>(row_len)) {
    quantize_row_weighted(type, x.data() + r, importance ? importance->data() : nullptr, q.data(), row_len);
    dequantize_row(type, q.data(), y.data() + r, row_len);
  }
  return y;
}

double weighted_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>* importance,
                      std::size_t begin = 0, std::size_t end = SIZE_MAX) {
  double error = 0.0;
  const std::size_t stop = std::min(end, x.size());
  const std::size_t period = importance ? importance->size() : 1;
  for (std::size_t i = begin; i < stop; ++i) {
    const double w = importance ? importance->data()[i % period] : 1.0;
    const double diff = static_cast<double>(x[i]) - static_cast<double>(y.data()[i]);
    error += w * diff * diff;
  }
  return error;
}

// ---- decoding hand-made blocks ------------------------------------------------

TEST(Grid4Dequantize, Iq4Nl) {
  BlockIQ4_NL b{};
  b.d = f32_to_f16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(DType::IQ4_NL, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * kIq4Values[j]) << j;
    EXPECT_EQ(y[j + 16], 0.5f * kIq4Values[15 - j]) << j;
  }
}

TEST(Grid4Dequantize, Iq4Xs) {
  BlockIQ4_XS b{};
  b.d = f32_to_f16(0.25f);
  // Group g gets l = 32 + g - 4 (scales -4 .. 3), then l = 63 and 0 at the ends.
  int l[8];
  for (int g = 0; g < 8; ++g) l[g] = 28 + g;
  l[0] = 0;
  l[7] = 63;
  for (int g = 0; g < 8; ++g) {
    b.scales_l[g / 2] = static_cast<std::uint8_t>(b.scales_l[g / 2] | ((l[g] & 15) << (4 * (g % 2))));
    b.scales_h = static_cast<std::uint16_t>(b.scales_h | ((l[g] >> 4) << (2 * g)));
  }
  for (int j = 0; j < 128; ++j) b.qs[j] = static_cast<std::uint8_t>((j % 16) | (((j + 3) % 16) << 4));
  const auto y = decode(DType::IQ4_XS, b);
  for (int g = 0; g < 8; ++g)
    for (int j = 0; j < 16; ++j) {
      const float scale = 0.25f * static_cast<float>(l[g] - 32);
      EXPECT_EQ(y[32 * g + j], scale * kIq4Values[j]) << g << " " << j;
      EXPECT_EQ(y[32 * g + 16 + j], scale * kIq4Values[(j + 3) % 16]) << g << " " << j;
    }
}

TEST(Grid4Dequantize, Mxfp4) {
  BlockMXFP4 b{};
  b.e = 127;  // E8M0 2^0, halved: d = 0.5
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(DType::MXFP4, b);
  const float fp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, 0, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], fp4[j]) << j;
    EXPECT_EQ(y[j + 16], fp4[15 - j]) << j;
  }
  EXPECT_FALSE(std::signbit(y[8]));  // code 8 is -0 in E2M1, +0 decoded
}

TEST(Grid4Dequantize, Nvfp4) {
  BlockNVFP4 b{};
  b.d[0] = 0x38;  // 1.0 in E4M3: d = 0.5
  b.d[1] = 0x40;  // 2.0: d = 1
  b.d[2] = 0x7f;  // E4M3's NaN: 0
  b.d[3] = 0x01;  // smallest subnormal 2^-9: d = 2^-10
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<std::uint8_t>((j % 8) | ((j % 8 + 8) << 4));
  const auto y = decode(DType::NVFP4, b);
  const float d[4] = {0.5f, 1.0f, 0.0f, 0x1p-10f};
  for (int g = 0; g < 4; ++g)
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(y[16 * g + i], d[g] * kFp4Values[i]) << g << " " << i;
      EXPECT_EQ(y[16 * g + 8 + i], d[g] * kFp4Values[i + 8]) << g << " " << i;
    }
}

TEST(Grid4Dequantize, ScaleBytes) {
  EXPECT_EQ(e8m0_half_to_f32(0), 0x1p-128f);
  EXPECT_EQ(e8m0_half_to_f32(1), 0x1p-127f);
  EXPECT_EQ(e8m0_half_to_f32(2), 0x1p-126f);
  EXPECT_EQ(e8m0_half_to_f32(127), 0.5f);
  EXPECT_EQ(e8m0_half_to_f32(255), 0x1p127f);
  EXPECT_EQ(ue4m3_half_to_f32(0x00), 0.0f);
  EXPECT_EQ(ue4m3_half_to_f32(0x7f), 0.0f);
  EXPECT_EQ(ue4m3_half_to_f32(0x7e), 224.0f);   // 448 halved
  EXPECT_EQ(ue4m3_half_to_f32(0x08), 0x1p-7f);  // smallest normal 2^-6, halved
  EXPECT_EQ(ue4m3_half_to_f32(0x07), 7 * 0x1p-10f);
  EXPECT_EQ(ue4m3_half_to_f32(0x80 | 0x38), 0.5f);  // the sign bit is ignored
  // Every byte decodes to a finite number, increasing over 1 .. 0x7e.
  for (int x = 1; x < 0x7e; ++x) EXPECT_LT(ue4m3_half_to_f32(std::uint8_t(x)), ue4m3_half_to_f32(std::uint8_t(x + 1)));
}

// ---- encoding -------------------------------------------------------------------

TEST(Grid4Quantize, RoundTripErrorAgainstQ4_0) {
  // Squared error over 64K Gaussian elements (plain and with outliers): the
  // IQ4 types spend 4.5 and 4.25 bits and must beat Q4_0's 4.5; the FP4
  // grid's coarse top steps cost MXFP4 (4.25 bits, power-of-two scales) and
  // NVFP4 (4.5 bits) some: they must stay within 2x and 1.5x of it.
  for (const float outliers : {0.0f, 0.01f}) {
    const std::vector<float> x = gaussian(65536, 31, outliers);
    const double q4 = weighted_error(x, round_trip(DType::Q4_0, x, 4096), nullptr);
    EXPECT_LT(weighted_error(x, round_trip(DType::IQ4_NL, x, 4096), nullptr), q4);
    EXPECT_LT(weighted_error(x, round_trip(DType::IQ4_XS, x, 4096), nullptr), q4);
    EXPECT_LT(weighted_error(x, round_trip(DType::MXFP4, x, 4096), nullptr), 2.0 * q4);
    EXPECT_LT(weighted_error(x, round_trip(DType::NVFP4, x, 4096), nullptr), 1.5 * q4);
  }
}

TEST(Grid4Quantize, ImportanceLowersTheWeightedError) {
  std::vector<float> importance(4096, 1.0f);
  for (std::size_t j = 0; j < importance.size(); j += 37) importance[j] = 100.0f;
  const std::vector<float> x = gaussian(8 * 4096, 32);
  for (DType type : kGridTypes) {
    const double unweighted = weighted_error(x, round_trip(type, x, 4096), &importance);
    const double weighted = weighted_error(x, round_trip(type, x, 4096, &importance), &importance);
    // MXFP4 only moves a power-of-two scale: less room to gain.
    EXPECT_LT(weighted, (type == DType::MXFP4 ? 0.95 : 0.8) * unweighted) << name(type);
  }
}

TEST(Grid4Quantize, WeightedMxfp4IsNeverWorseThanGguf) {
  std::mt19937 rng(33);
  std::uniform_real_distribution<float> decades(-3.0f, 3.0f);
  std::vector<float> importance(4096);
  for (auto& v : importance) v = std::pow(10.0f, decades(rng));
  const std::vector<float> x = gaussian(4 * 4096, 34, 0.01f);
  const std::vector<float> exact = round_trip(DType::MXFP4, x, 4096);
  const std::vector<float> searched = round_trip(DType::MXFP4, x, 4096, &importance);
  int num_better = 0;
  for (std::size_t b = 0; b < x.size(); b += 32) {
    const double e_exact = weighted_error(x, exact, &importance, b, b + 32);
    const double e_searched = weighted_error(x, searched, &importance, b, b + 32);
    ASSERT_LE(e_searched, e_exact) << b / 32;
    num_better += e_searched < e_exact;
  }
  EXPECT_GT(num_better, 0);
}

TEST(Grid4Quantize, ZeroBlocksDecodeToPositiveZeros) {
  const std::vector<float> zeros(256, 0.0f);
  for (DType type : kGridTypes) {
    const std::vector<float> y = round_trip(type, zeros, 256);
    for (const float v : y) ASSERT_EQ(std::bit_cast<std::uint32_t>(v), 0u) << name(type);
  }
}

TEST(Grid4Quantize, ExtremeMagnitudesStayFinite) {
  for (const float magnitude : {1e30f, 1e-30f, 1e-42f}) {
    std::vector<float> x = gaussian(256, 35);
    for (auto& v : x) v *= magnitude;
    for (DType type : kGridTypes) {
      const std::vector<float> y = round_trip(type, x, 256);
      for (const float v : y) ASSERT_TRUE(std::isfinite(v)) << name(type) << " " << magnitude;
    }
  }
}

TEST(Grid4Quantize, EveryElementLandsNearItsValue) {
  // Ordinary data: no element may be further off than a quarter of its
  // group's largest magnitude (the widest grid step is 2 of 6 or 24 of 127
  // away from the top, halved by rounding, plus the scale's own error).
  const std::vector<float> x = gaussian(4096, 36, 0.01f);
  for (DType type : kGridTypes) {
    const std::vector<float> y = round_trip(type, x, 4096);
    const std::size_t group = type == DType::NVFP4 ? 16 : 32;
    for (std::size_t b = 0; b < x.size(); b += group) {
      float amax = 0.0f;
      for (std::size_t j = b; j < b + group; ++j) amax = std::max(amax, std::fabs(x[j]));
      for (std::size_t j = b; j < b + group; ++j) ASSERT_LE(std::fabs(x[j] - y[j]), 0.25f * amax) << name(type) << j;
    }
  }
}

TEST(Grid4Quantize, SearchedTypesRefuseNonFiniteInput) {
  for (DType type : {DType::IQ4_NL, DType::IQ4_XS, DType::NVFP4}) {
    for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> x = gaussian(256, 37);
      x[100] = bad;
      std::vector<char> q(static_cast<std::size_t>(row_bytes(type, 256)));
      try {
        quantize_row(type, x.data(), q.data(), 256);
        FAIL() << name(type) << " took " << bad;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("element 100"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(Grid4Quantize, Mxfp4DefinesNonFiniteInput) {
  // gguf's own encoder runs on any input; where numpy's casts are undefined
  // folio saturates the scale byte (tests/python/test_quants.py).
  std::vector<float> x = gaussian(96, 38);
  x[3] = std::numeric_limits<float>::quiet_NaN();  // block 0: NaN amax gives e = 0
  x[40] = std::numeric_limits<float>::infinity();  // block 1: infinite amax gives e = 255
  for (int j = 64; j < 96; ++j) x[j] = 1e-39f;     // block 2: below 2^-125 gives e = 0
  std::vector<BlockMXFP4> q(3);
  quantize_row(DType::MXFP4, x.data(), q.data(), 96);
  EXPECT_EQ(q[0].e, 0);
  EXPECT_EQ(q[0].qs[3] & 15, 0);  // the NaN's code
  EXPECT_EQ(q[1].e, 255);
  EXPECT_EQ(q[2].e, 0);
}

TEST(Grid4Quantize, RowsMustBeWholeBlocks) {
  std::vector<float> x(64, 1.0f);
  std::vector<char> q(1024);
  EXPECT_THROW(quantize_row(DType::NVFP4, x.data(), q.data(), 32), Error);
  EXPECT_THROW(quantize_row(DType::IQ4_XS, x.data(), q.data(), 64), Error);
  EXPECT_THROW(dequantize_row(DType::NVFP4, q.data(), x.data(), 32), Error);
  EXPECT_NO_THROW(quantize_row(DType::NVFP4, x.data(), q.data(), 64));
}

}  // namespace
}  // namespace folio
