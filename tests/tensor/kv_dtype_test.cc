// The KV cache number formats: every FP8 E4M3 code decodes to its value, the
// encoder rounds to nearest even and saturates, q8_0 and fp8_e4m3 rows round
// trip within half a step of their scale, and the byte counts that size the
// cache (34 bytes per 32 numbers for q8_0).
#include "tensor/kv_dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "tensor/fp8.h"
#include "tensor/half.h"

namespace folio {
namespace {

// E4M3 by the definition: (-1)^s x 2^(e - 7) x (1 + m/8), or 2^-6 x m/8
// when e = 0; S.1111.111 is NaN.
double e4m3_by_definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 0x0f, m = code & 0x07;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -magnitude : magnitude;
}

TEST(Fp8E4M3, EveryCodeDecodesToItsValue) {
  for (int c = 0; c < 256; ++c) {
    const double want = e4m3_by_definition(c);
    const float got = fp8_e4m3_to_f32(static_cast<std::uint8_t>(c));
    const float table = fp8_e4m3_table()[static_cast<std::size_t>(c)];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      EXPECT_TRUE(std::isnan(table)) << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << c;
      EXPECT_EQ(std::signbit(got), c >= 128) << c;  // -0 keeps its sign
      EXPECT_EQ(table, got) << c;
    }
  }
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
}

TEST(Fp8E4M3, EncodeOfEveryValueGivesItsCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(f32_to_fp8_e4m3(fp8_e4m3_to_f32(static_cast<std::uint8_t>(c))), c) << c;
  }
}

TEST(Fp8E4M3, EncodeRoundsToNearestEven) {
  // Between neighbouring codes c and c + 1 (both signs): below the midpoint
  // goes to c, above to c + 1, the midpoint itself to the even code.
  for (int sign : {0, 0x80}) {
    for (int c = 0; c < 0x7e; ++c) {
      const float lo = fp8_e4m3_to_f32(static_cast<std::uint8_t>(sign | c));
      const float hi = fp8_e4m3_to_f32(static_cast<std::uint8_t>(sign | (c + 1)));
      const float mid = (lo + hi) / 2;  // exact: both have few bits
      const int even = (c % 2 == 0) ? c : c + 1;
      EXPECT_EQ(f32_to_fp8_e4m3(mid), sign | even) << "midpoint above code " << c;
      EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, lo)), sign | c) << "just below the midpoint above " << c;
      EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, hi)), sign | (c + 1)) << "just above the midpoint above " << c;
    }
  }
  // Below half the smallest subnormal: zero of the same sign.
  EXPECT_EQ(f32_to_fp8_e4m3(0x1p-11f), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(-0x1p-11f), 0x80);
}

TEST(Fp8E4M3, EncodeSaturatesAndKeepsNaN) {
  for (float big : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(f32_to_fp8_e4m3(big), 0x7e) << big;
    EXPECT_EQ(f32_to_fp8_e4m3(-big), 0xfe) << -big;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
}

std::vector<float> random_row(std::int64_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = dist(rng);
  return x;
}

TEST(KvDType, Q8_0RowsRoundTripWithinHalfAStepOfTheirBlock) {
  std::mt19937 rng(1);
  for (std::int64_t n : {32, 64, 128, 256}) {
    for (float scale : {1e-3f, 1.0f, 30.0f}) {
      auto x = random_row(n, rng, scale);
      x[5] *= 40;  // an outlier in the first block only
      ASSERT_EQ(kv_row_bytes(KvDType::kQ8_0, n), n);
      ASSERT_EQ(kv_row_scales(KvDType::kQ8_0, n), n / 32);
      std::vector<std::int8_t> codes(static_cast<std::size_t>(n));
      std::vector<std::uint16_t> scales(static_cast<std::size_t>(n / 32));
      encode_kv_row(KvDType::kQ8_0, x.data(), n, codes.data(), scales.data());
      std::vector<float> y(static_cast<std::size_t>(n));
      decode_kv_row(KvDType::kQ8_0, codes.data(), scales.data(), n, y.data());
      for (std::int64_t b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
        const float d = f16_to_f32(scales[b]);
        EXPECT_EQ(scales[b], f32_to_f16(amax / 127)) << "block " << b;  // GGUF's d
        int top = 0;
        for (int i = 0; i < 32; ++i) {
          const std::int64_t j = b * 32 + i;
          EXPECT_EQ(y[j], static_cast<float>(codes[j]) * d);  // decoding is code x scale
          EXPECT_LE(std::fabs(y[j] - x[j]), 0.5f * d * 1.01f) << "n " << n << " at " << j;
          top = std::max(top, std::abs(static_cast<int>(codes[j])));
        }
        EXPECT_GE(top, 126) << "the block's largest number uses the full range";
      }
    }
  }
}

TEST(KvDType, Q8_0OfZerosIsZeros) {
  std::vector<float> x(64, 0.0f), y(64, 1.0f);
  std::vector<std::int8_t> codes(64, 1);
  std::vector<std::uint16_t> scales(2, 1);
  encode_kv_row(KvDType::kQ8_0, x.data(), 64, codes.data(), scales.data());
  decode_kv_row(KvDType::kQ8_0, codes.data(), scales.data(), 64, y.data());
  EXPECT_EQ(y, x);
}

TEST(KvDType, Fp8RowsRoundTripWithinHalfAStep) {
  std::mt19937 rng(2);
  for (std::int64_t n : {1, 9, 64, 256}) {
    for (float scale : {1e-3f, 1.0f, 1000.0f}) {
      auto x = random_row(n, rng, scale);
      ASSERT_EQ(kv_row_scales(KvDType::kFp8E4M3, n), 1);
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(n));
      std::uint16_t s = 0;
      encode_kv_row(KvDType::kFp8E4M3, x.data(), n, codes.data(), &s);
      std::vector<float> y(static_cast<std::size_t>(n));
      decode_kv_row(KvDType::kFp8E4M3, codes.data(), &s, n, y.data());
      const float d = f16_to_f32(s);
      for (std::int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(y[i], fp8_e4m3_to_f32(codes[i]) * d);
        // 3 mantissa bits: half a step is 1/16 of the magnitude, or half the
        // subnormal step of 2^-9 x d.
        const float bound = std::max(std::fabs(x[i]) / 16, 0x1p-10f * d) * 1.01f;
        EXPECT_LE(std::fabs(y[i] - x[i]), bound) << "n " << n << " scale " << scale << " at " << i;
      }
    }
  }
}

TEST(KvDType, RowBytesCountScales) {
  EXPECT_EQ(kv_row_total_bytes(KvDType::kF32, 64), 256);
  EXPECT_EQ(kv_row_total_bytes(KvDType::kF16, 64), 128);
  EXPECT_EQ(kv_row_total_bytes(KvDType::kBF16, 64), 128);
  EXPECT_EQ(kv_row_total_bytes(KvDType::kQ8_0, 64), 68);  // 2 x (32 + 2)
  EXPECT_EQ(kv_row_total_bytes(KvDType::kQ8_0, 32), 34);
  EXPECT_EQ(kv_row_total_bytes(KvDType::kFp8E4M3, 64), 66);
  EXPECT_TRUE(kv_dim_problem(KvDType::kQ8_0, 48));
  EXPECT_FALSE(kv_dim_problem(KvDType::kFp8E4M3, 48));
  std::vector<float> x(48);
  std::vector<std::int8_t> codes(48);
  std::vector<std::uint16_t> scales(2);
  EXPECT_THROW(encode_kv_row(KvDType::kQ8_0, x.data(), 48, codes.data(), scales.data()), Error);
}

TEST(KvDType, ParsesFlagsForBothOrKAndV) {
  EXPECT_EQ(kv_cache_dtype_from_flag("q8_0"), KvCacheDType(KvDType::kQ8_0));
  EXPECT_EQ(kv_cache_dtype_from_flag("FP8"), KvCacheDType(KvDType::kFp8E4M3));
  EXPECT_EQ(kv_cache_dtype_from_flag("q8_0:f16"), KvCacheDType(KvDType::kQ8_0, KvDType::kF16));
  EXPECT_EQ(kv_cache_dtype_from_flag("q8_0:f16").name(), "q8_0:f16");
  EXPECT_EQ(kv_cache_dtype_from_flag("fp8_e4m3:fp8_e4m3").name(), "fp8_e4m3");
  EXPECT_EQ(KvCacheDType(DType::BF16), KvCacheDType(KvDType::kBF16));
  EXPECT_FALSE(parse_kv_cache_dtype("q4_k"));
  EXPECT_FALSE(parse_kv_cache_dtype("f16:"));
  EXPECT_FALSE(parse_kv_cache_dtype("f16:q8_0:f32"));
  try {
    kv_cache_dtype_from_flag("int8");
    FAIL() << "int8 is not a KV cache type";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace folio
