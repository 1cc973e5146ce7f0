// Reference (de)quantization: hand-decoded blocks of every type, round-trip
// error bounds, half-precision edge cases and the errors for bad input. The
// bit-for-bit comparison with the gguf package is tests/python/test_quants.py.
#include <gtest/gtest.h>

#include <algorithm>
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

constexpr float kInf = std::numeric_limits<float>::infinity();

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

template <typename Block>
std::vector<float> decode(DType type, const Block& block) {
  std::vector<float> out(static_cast<std::size_t>(info(type).block_elems));
  dequantize_row(type, &block, out.data(), static_cast<std::int64_t>(out.size()));
  return out;
}

template <typename Block>
Block encode(DType type, const std::vector<float>& x) {
  Block block;
  std::memset(&block, 0xAB, sizeof(block));
  quantize_row(type, x.data(), &block, static_cast<std::int64_t>(x.size()));
  return block;
}

// ---- half precision ------------------------------------------------------

TEST(Half, F16ToF32KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));          // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));          // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));       // largest subnormal
  EXPECT_EQ(bits(f16_to_f32(0x8000)), 0x80000000u);              // -0 keeps its sign
  EXPECT_EQ(f16_to_f32(0x7c00), kInf);
  EXPECT_EQ(f16_to_f32(0xfc00), -kInf);
  EXPECT_EQ(bits(f16_to_f32(0x7e00)), 0x7fc00000u);              // quiet NaN
  EXPECT_EQ(bits(f16_to_f32(0x7c01)), 0x7f802000u);              // signalling NaN stays signalling
  EXPECT_EQ(bits(f16_to_f32(0xfd55)), 0xffaaa000u);              // sign and payload kept
}

TEST(Half, F32ToF16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, down to even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, up to even
  EXPECT_EQ(f32_to_f16(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // tie between the largest finite (odd) and inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(f32_to_f16(kInf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xfc00);
}

TEST(Half, F32ToF16Subnormals) {
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);      // tie, down to even zero
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);      // tie, up to even
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -26)), 0x8000);     // underflow keeps the sign
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.0f, -24)), 0x03ff);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // rounds up to a normal
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(Half, F32ToF16NaNKeepsSignAndTopPayload) {
  EXPECT_EQ(f32_to_f16(from_bits(0x7fc00000)), 0x7e00);
  EXPECT_EQ(f32_to_f16(from_bits(0xffc00000)), 0xfe00);
  EXPECT_EQ(f32_to_f16(from_bits(0x7fa00000)), 0x7d00);  // signalling stays signalling
  EXPECT_EQ(f32_to_f16(from_bits(0x7f800001)), 0x7c01);  // payload lost below bit 13: still a NaN
  EXPECT_EQ(f32_to_f16(from_bits(0xff801fff)), 0xfc01);
  EXPECT_EQ(f32_to_f16(from_bits(0x7fffffff)), 0x7fff);
}

TEST(Half, EveryF16SurvivesARoundTrip) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    ASSERT_EQ(f32_to_f16(f16_to_f32(half)), half) << std::hex << h;
  }
}

TEST(Half, Bf16) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, down to even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, up to even
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);   // rounds to inf
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f800001)), 0x7fc0);  // NaN made quiet
  EXPECT_EQ(f32_to_bf16(from_bits(0xffa0ffff)), 0xffe0);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7fc0ffff)), 0x7fc0);  // no rounding carry out of a NaN
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bits(bf16_to_f32(0xff81)), 0xff810000u);
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    ASSERT_EQ(f32_to_bf16(bf16_to_f32(half)), nan ? (half | 0x0040) : half) << std::hex << h;
  }
}

TEST(Half, ConversionsAreConstexpr) {
  static_assert(f32_to_f16(1.0f) == 0x3c00);
  static_assert(f16_to_f32(0x3c00) == 1.0f);
  static_assert(f32_to_bf16(-2.0f) == 0xc000);
  static_assert(bf16_to_f32(0xc000) == -2.0f);
}

// ---- block layouts -------------------------------------------------------

TEST(QuantBlocks, SizesMatchTheDTypeTable) {
  auto expect = [](DType type, std::size_t block_bytes, int block_elems) {
    EXPECT_EQ(info(type).block_bytes, static_cast<std::int64_t>(block_bytes)) << name(type);
    EXPECT_EQ(info(type).block_elems, block_elems) << name(type);
  };
  expect(DType::Q4_0, sizeof(BlockQ4_0), kBlockElems);
  expect(DType::Q4_1, sizeof(BlockQ4_1), kBlockElems);
  expect(DType::Q5_0, sizeof(BlockQ5_0), kBlockElems);
  expect(DType::Q5_1, sizeof(BlockQ5_1), kBlockElems);
  expect(DType::Q8_0, sizeof(BlockQ8_0), kBlockElems);
  expect(DType::Q8_1, sizeof(BlockQ8_1), kBlockElems);
  expect(DType::Q2_K, sizeof(BlockQ2_K), kSuperBlockElems);
  expect(DType::Q3_K, sizeof(BlockQ3_K), kSuperBlockElems);
  expect(DType::Q4_K, sizeof(BlockQ4_K), kSuperBlockElems);
  expect(DType::Q5_K, sizeof(BlockQ5_K), kSuperBlockElems);
  expect(DType::Q6_K, sizeof(BlockQ6_K), kSuperBlockElems);
  expect(DType::Q8_K, sizeof(BlockQ8_K), kSuperBlockElems);
  expect(DType::IQ4_NL, sizeof(BlockIQ4_NL), kBlockElems);
  expect(DType::IQ4_XS, sizeof(BlockIQ4_XS), kSuperBlockElems);
  expect(DType::MXFP4, sizeof(BlockMXFP4), kBlockElems);
  expect(DType::NVFP4, sizeof(BlockNVFP4), kNvfp4Elems);
}

TEST(QuantBlocks, DequantizableFlagsMatchTheDequantizers) {
  int num_dequantizable = 0;
  for (std::uint32_t id = 0; id < 256; ++id) {
    const auto t = dtype_info(id);
    if (!t) continue;
    std::vector<char> zeros(static_cast<std::size_t>(t->block_bytes), 0);
    std::vector<float> out(static_cast<std::size_t>(t->block_elems));
    if (t->dequantizable) {
      ++num_dequantizable;
      EXPECT_NO_THROW(dequantize_row(t->type, zeros.data(), out.data(), t->block_elems)) << t->name;
    } else {
      EXPECT_THROW(dequantize_row(t->type, zeros.data(), out.data(), t->block_elems), Error) << t->name;
    }
  }
  EXPECT_EQ(num_dequantizable, 18);
}

TEST(QuantBlocks, CanQuantize) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                     DType::Q8_0, DType::Q8_K, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                     DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4, DType::NVFP4})
    EXPECT_TRUE(can_quantize(type)) << name(type);
  for (DType type : {DType::Q8_1, DType::IQ2_XXS, DType::I8, DType::IQ3_S})
    EXPECT_FALSE(can_quantize(type)) << name(type);
}

// ---- dequantization of hand-made blocks -----------------------------------

TEST(Dequantize, PlainTypes) {
  const float f32[3] = {1.5f, -0.0f, kInf};
  float out[3];
  dequantize_row(DType::F32, f32, out, 3);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(bits(out[1]), 0x80000000u);
  EXPECT_EQ(out[2], kInf);

  const std::uint16_t f16[3] = {0x3c00, 0xc200, 0x0001};
  dequantize_row(DType::F16, f16, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -24));

  const std::uint16_t bf16[3] = {0x3f80, 0xc040, 0x7f80};
  dequantize_row(DType::BF16, bf16, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
  EXPECT_EQ(out[2], kInf);
}

TEST(Dequantize, Q4_0) {
  BlockQ4_0 b{};
  b.d = 0x3800;  // 0.5
  std::memset(b.qs, 0x88, sizeof(b.qs));
  b.qs[0] = 0xF0;  // element 0: 0 - 8, element 16: 15 - 8
  b.qs[1] = 0x98;  // element 1: 8 - 8, element 17: 9 - 8
  const auto y = decode(DType::Q4_0, b);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[17], 0.5f);
  EXPECT_EQ(y[31], 0.0f);
}

TEST(Dequantize, Q4_1) {
  BlockQ4_1 b{};
  b.d = 0x3c00;  // 1
  b.m = 0xc000;  // -2
  b.qs[0] = 0x3F;
  const auto y = decode(DType::Q4_1, b);
  EXPECT_EQ(y[0], 13.0f);
  EXPECT_EQ(y[16], 1.0f);
  EXPECT_EQ(y[5], -2.0f);
}

TEST(Dequantize, Q5_0) {
  BlockQ5_0 b{};
  b.d = 0x4000;  // 2
  const std::uint32_t qh = (1u << 0) | (1u << 17);
  std::memcpy(b.qh, &qh, 4);
  b.qs[0] = 0x0F;  // element 0 low 15 (+16 from qh), element 16 low 0
  b.qs[1] = 0x20;  // element 1 low 0, element 17 low 2 (+16 from qh)
  const auto y = decode(DType::Q5_0, b);
  EXPECT_EQ(y[0], 30.0f);
  EXPECT_EQ(y[16], -32.0f);
  EXPECT_EQ(y[1], -32.0f);
  EXPECT_EQ(y[17], 4.0f);
}

TEST(Dequantize, Q5_1) {
  BlockQ5_1 b{};
  b.d = 0x3800;  // 0.5
  b.m = 0x3c00;  // 1
  const std::uint32_t qh = 1u << 0;
  std::memcpy(b.qh, &qh, 4);
  b.qs[0] = 0x0F;
  const auto y = decode(DType::Q5_1, b);
  EXPECT_EQ(y[0], 16.5f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[16], 1.0f);
}

TEST(Dequantize, Q8_0) {
  BlockQ8_0 b{};
  b.d = 0x3400;  // 0.25
  b.qs[0] = -128;
  b.qs[1] = 127;
  b.qs[2] = 1;
  const auto y = decode(DType::Q8_0, b);
  EXPECT_EQ(y[0], -32.0f);
  EXPECT_EQ(y[1], 31.75f);
  EXPECT_EQ(y[2], 0.25f);
  EXPECT_EQ(y[3], 0.0f);
}

TEST(Dequantize, Q2_K) {
  BlockQ2_K b{};
  b.d = 0x3c00;     // 1
  b.dmin = 0x3800;  // 0.5
  b.scales[0] = 0x32;  // group 0: scale 2, min 3
  b.scales[2] = 0x01;  // group 2: scale 1, min 0
  b.scales[4] = 0x14;  // group 4: scale 4, min 1
  b.scales[8] = 0xFF;  // group 8: scale 15, min 15
  b.qs[0] = 0xE4;      // elements 0, 32, 64, 96 get q = 0, 1, 2, 3
  b.qs[32] = 0x03;     // element 128 gets q = 3
  const auto y = decode(DType::Q2_K, b);
  EXPECT_EQ(y[0], -1.5f);   // 2*0 - 1.5
  EXPECT_EQ(y[1], -1.5f);
  EXPECT_EQ(y[32], 1.0f);   // 1*1 - 0
  EXPECT_EQ(y[64], 7.5f);   // 4*2 - 0.5
  EXPECT_EQ(y[96], 0.0f);   // group 6: scale 0, min 0
  EXPECT_EQ(y[128], 37.5f); // 15*3 - 7.5
}

TEST(Dequantize, Q3_K) {
  BlockQ3_K b{};
  b.d = 0x3c00;        // 1
  b.scales[0] = 0x0A;  // group 0 low bits 10
  b.scales[8] = 0x06;  // group 0 high bits 2: 10 | 32 = 42, minus 32 is 10; group 4 high bits 1
  b.scales[4] = 0x03;  // group 4 low bits 3: 3 | 16 = 19, minus 32 is -13
  b.scales[7] = 0x50;  // group 15 low bits 5
  b.scales[11] = 0xC0; // group 15 high bits 3: 5 | 48 = 53, minus 32 is 21
  b.qs[0] = 0x03;      // element 0 low bits 3
  b.qs[1] = 0x01;      // element 1 low bits 1
  b.hmask[0] = 0x01;   // element 0 high bit set: no -4
  b.qs[63] = 0x80;     // element 255 low bits 2
  b.hmask[31] = 0x80;  // element 255 high bit set
  const auto y = decode(DType::Q3_K, b);
  EXPECT_EQ(y[0], 30.0f);     // 10 * 3
  EXPECT_EQ(y[1], -30.0f);    // 10 * (1 - 4)
  EXPECT_EQ(y[255], 42.0f);   // 21 * 2
  EXPECT_EQ(y[64], 52.0f);    // group 4: -13 * (0 - 4)
  EXPECT_EQ(y[100], 128.0f);  // group 6: (0 - 32) * (0 - 4)
}

TEST(Dequantize, Q4_K) {
  BlockQ4_K b{};
  b.d = 0x3c00;        // 1
  b.dmin = 0x4000;     // 2
  b.scales[0] = 0xC5;  // group 0 scale 5; top bits 3 become group 4's scale bits 4-5
  b.scales[4] = 0x41;  // group 0 min 1; top bits 1 become group 4's min bits 4-5
  b.scales[8] = 0x27;  // group 4: scale 7 | 48 = 55, min 2 | 16 = 18
  b.qs[0] = 0x9A;      // element 0 q = 10, element 32 q = 9
  b.qs[64] = 0x03;     // element 128 q = 3
  const auto y = decode(DType::Q4_K, b);
  EXPECT_EQ(y[0], 48.0f);     // 5*10 - 2*1
  EXPECT_EQ(y[32], 0.0f);     // group 1 is all zero
  EXPECT_EQ(y[128], 129.0f);  // 55*3 - 2*18
}

TEST(Dequantize, Q5_K) {
  BlockQ5_K b{};
  b.d = 0x3c00;
  b.dmin = 0x4000;
  b.scales[0] = 0xC5;
  b.scales[4] = 0x41;
  b.scales[8] = 0x27;
  b.qs[0] = 0x9A;
  b.qs[64] = 0x03;
  b.qh[0] = 0x11;  // bit 4 of q for element 0 (bit 0) and element 128 (bit 4)
  const auto y = decode(DType::Q5_K, b);
  EXPECT_EQ(y[0], 128.0f);     // 5*26 - 2
  EXPECT_EQ(y[32], 0.0f);
  EXPECT_EQ(y[128], 1009.0f);  // 55*19 - 36
}

TEST(Dequantize, Q6_K) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  b.scales[0] = -2;
  b.scales[4] = 5;
  b.scales[15] = 3;
  b.ql[0] = 0x21;    // element 0 low 1, element 64 low 2
  b.qh[0] = 0x23;    // element 0 high 3, element 32 high 0, element 64 high 2
  b.ql[127] = 0xF0;  // element 255 low 15
  b.qh[63] = 0xC0;   // element 255 high 3
  const auto y = decode(DType::Q6_K, b);
  EXPECT_EQ(y[0], -17.0f);  // 0.5*-2 * (49 - 32)
  EXPECT_EQ(y[32], 0.0f);   // group 2 scale 0
  EXPECT_EQ(y[64], 5.0f);   // 0.5*5 * (34 - 32)
  EXPECT_EQ(y[255], 46.5f); // 0.5*3 * (63 - 32)
}

TEST(Dequantize, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.5f;
  b.qs[0] = -128;
  b.qs[255] = 3;
  const auto y = decode(DType::Q8_K, b);
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[255], 1.5f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(Dequantize, ReadsBlocksAtAnyByteOffset) {
  std::mt19937 rng(7);
  std::vector<unsigned char> bytes(2 * sizeof(BlockQ6_K) + 1);
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  bytes[1 + 208] = 0x00;  // keep both scales finite so == is meaningful
  bytes[1 + 209] = 0x3c;
  bytes[1 + 210 + 208] = 0x00;
  bytes[1 + 210 + 209] = 0x3c;
  std::vector<unsigned char> aligned(bytes.begin() + 1, bytes.end());
  std::vector<float> a(512), b(512);
  dequantize_row(DType::Q6_K, bytes.data() + 1, a.data(), 512);
  dequantize_row(DType::Q6_K, aligned.data(), b.data(), 512);
  EXPECT_EQ(a, b);
}

// ---- quantization of hand-made rows ---------------------------------------

TEST(Quantize, Q8_0RoundsHalvesAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = -127.0f;  // d = 127 / 127 = 1
  x[1] = 63.5f;
  x[2] = -0.5f;
  x[3] = 0.49f;
  const auto b = encode<BlockQ8_0>(DType::Q8_0, x);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 64);
  EXPECT_EQ(b.qs[2], -1);
  EXPECT_EQ(b.qs[3], 0);
  EXPECT_EQ(b.qs[4], 0);
}

TEST(Quantize, Q4_0) {
  std::vector<float> x(32, 0.0f);
  x[0] = -16.0f;  // largest magnitude: d = -16 / -8 = 2, codes = trunc(x / 2 + 8.5)
  x[1] = 16.0f;   // 16.5 clipped to 15
  x[2] = 3.0f;    // 10
  x[3] = -1.0f;   // 8
  x[4] = 0.9f;    // 8.95 -> 8
  x[16] = 5.0f;   // 11
  const auto b = encode<BlockQ4_0>(DType::Q4_0, x);
  EXPECT_EQ(b.d, 0x4000);
  EXPECT_EQ(b.qs[0], 0xB0);
  EXPECT_EQ(b.qs[1], 0x8F);
  EXPECT_EQ(b.qs[2], 0x8A);
  EXPECT_EQ(b.qs[3], 0x88);
  EXPECT_EQ(b.qs[4], 0x88);
}

TEST(Quantize, Q4_1) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16);  // min 0, max 15: d = 1
  const auto b = encode<BlockQ4_1>(DType::Q4_1, x);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.m, 0x0000);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], j | (j << 4)) << j;
}

TEST(Quantize, Q5_0) {
  std::vector<float> x(32, 0.0f);
  x[0] = 32.0f;   // d = 32 / -16 = -2: codes = trunc(x / -2 + 16.5)
  x[1] = -32.0f;  // 32.5 clipped to 31
  x[2] = 1.0f;    // 16
  x[3] = -1.0f;   // 17
  const auto b = encode<BlockQ5_0>(DType::Q5_0, x);
  EXPECT_EQ(b.d, 0xc000);
  EXPECT_EQ(b.qs[0], 0x00);
  EXPECT_EQ(b.qs[1], 0x0F);
  EXPECT_EQ(b.qs[2], 0x00);
  EXPECT_EQ(b.qs[3], 0x01);
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  EXPECT_EQ(qh, 0xFFFFFFFEu);  // every code but element 0's is >= 16
}

TEST(Quantize, Q5_1) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j);  // min 0, max 31: d = 1
  const auto b = encode<BlockQ5_1>(DType::Q5_1, x);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.m, 0x0000);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], j | (j << 4)) << j;
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  EXPECT_EQ(qh, 0xFFFF0000u);
}

TEST(Quantize, Q8_KRoundsHalvesToEven) {
  std::vector<float> x(256, 0.0f);
  x[0] = -254.0f;  // iscale = -127 / -254 = 0.5, d = 2
  x[1] = 127.0f;   // 63.5 -> 64
  x[2] = 1.0f;     // 0.5 -> 0
  x[3] = 3.0f;     // 1.5 -> 2
  x[4] = -5.0f;    // -2.5 -> -2
  x[16] = 2.0f;    // 1, in the second group
  const auto b = encode<BlockQ8_K>(DType::Q8_K, x);
  EXPECT_EQ(b.d, 2.0f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 64);
  EXPECT_EQ(b.qs[2], 0);
  EXPECT_EQ(b.qs[3], 2);
  EXPECT_EQ(b.qs[4], -2);
  EXPECT_EQ(b.bsums[0], -127 + 64 + 2 - 2);
  EXPECT_EQ(b.bsums[1], 1);
  EXPECT_EQ(b.bsums[2], 0);
}

TEST(Quantize, ZeroBlocks) {
  const std::vector<float> zeros32(32, 0.0f);
  EXPECT_EQ(encode<BlockQ8_0>(DType::Q8_0, zeros32).d, 0x0000);
  // gguf takes the sign of d from the largest element over -8: 0 / -8 is -0.
  EXPECT_EQ(encode<BlockQ4_0>(DType::Q4_0, zeros32).d, 0x8000);
  EXPECT_EQ(encode<BlockQ4_0>(DType::Q4_0, zeros32).qs[0], 0x88);
  EXPECT_EQ(encode<BlockQ5_0>(DType::Q5_0, zeros32).qs[0], 0x00);
  const auto q4_1 = encode<BlockQ4_1>(DType::Q4_1, zeros32);
  EXPECT_EQ(q4_1.d, 0x0000);
  EXPECT_EQ(q4_1.m, 0x0000);
  EXPECT_EQ(q4_1.qs[7], 0x00);
  const auto q8_k = encode<BlockQ8_K>(DType::Q8_K, std::vector<float>(256, -0.0f));
  EXPECT_EQ(bits(q8_k.d), 0u);
  for (int j = 0; j < 256; ++j) ASSERT_EQ(q8_k.qs[j], 0);
  for (int g = 0; g < 16; ++g) ASSERT_EQ(q8_k.bsums[g], 0);
}

TEST(Quantize, NonFiniteInputsGiveDefinedCodes) {
  std::vector<float> x(32, 1.0f);
  x[5] = kInf;  // d = inf / 127 = inf, 1 / d = 0, and inf * 0 is NaN: code 0
  const auto q8 = encode<BlockQ8_0>(DType::Q8_0, x);
  EXPECT_EQ(q8.d, 0x7c00);
  EXPECT_EQ(q8.qs[5], 0);
  EXPECT_EQ(q8.qs[0], 0);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  const auto q4 = encode<BlockQ4_0>(DType::Q4_0, x);
  EXPECT_EQ(q4.d, 0x7e00);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q4.qs[j], 0x00) << j;
}

// ---- round trips -----------------------------------------------------------

// The largest error quantize_row then dequantize_row may make on one block.
float error_bound(DType type, const float* x, int count) {
  float amax = 0.0f;
  float lo = x[0];
  float hi = x[0];
  for (int j = 0; j < count; ++j) {
    amax = std::max(amax, std::fabs(x[j]));
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  // How far an f16 scale may be from the float it was rounded from: half an
  // ulp, relative for normals, 2^-25 absolute in the subnormal range.
  auto f16_error = [](float v) { return std::max(std::fabs(v) * std::ldexp(1.0f, -11), std::ldexp(1.0f, -25)); };
  const float slack = amax * 1e-6f;
  switch (type) {
    case DType::Q8_0: return amax / 127 * 0.5f + 127 * f16_error(amax / 127) + slack;
    // The code range is one step short on the side opposite the largest
    // element, so those elements may be a whole step off.
    case DType::Q4_0: return amax / 8 + 8 * f16_error(amax / 8) + slack;
    case DType::Q5_0: return amax / 16 + 16 * f16_error(amax / 16) + slack;
    case DType::Q4_1: return (hi - lo) / 15 * 0.5f + 15 * f16_error((hi - lo) / 15) + f16_error(lo) + slack;
    case DType::Q5_1: return (hi - lo) / 31 * 0.5f + 31 * f16_error((hi - lo) / 31) + f16_error(lo) + slack;
    case DType::Q8_K: return amax / 127 * 0.5f + slack;
    default: return 0.0f;
  }
}

TEST(RoundTrip, BlockTypesStayWithinTheirStep) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-6.0f, 6.0f);
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_1, DType::Q5_1, DType::Q8_K}) {
    const int block = static_cast<int>(info(type).block_elems);
    const int num_blocks = 200;
    std::vector<float> x(static_cast<std::size_t>(block * num_blocks));
    for (int i = 0; i < num_blocks; ++i) {
      const float scale = std::pow(10.0f, log_scale(rng) / 2);  // keeps scales inside f16's range
      for (int j = 0; j < block; ++j) x[static_cast<std::size_t>(i * block + j)] = normal(rng) * scale;
    }
    std::vector<char> q(static_cast<std::size_t>(row_bytes(type, static_cast<std::int64_t>(x.size()))));
    std::vector<float> y(x.size());
    quantize_row(type, x.data(), q.data(), static_cast<std::int64_t>(x.size()));
    dequantize_row(type, q.data(), y.data(), static_cast<std::int64_t>(y.size()));
    float worst = 0.0f;  // error relative to the bound; must stay <= 1
    for (int i = 0; i < num_blocks; ++i) {
      const float* xb = x.data() + i * block;
      const float bound = error_bound(type, xb, block);
      const float* yb = y.data() + i * block;
      for (int j = 0; j < block; ++j) worst = std::max(worst, std::fabs(xb[j] - yb[j]) / bound);
    }
    EXPECT_LE(worst, 1.0f) << name(type);
    EXPECT_GT(worst, 0.2f) << name(type) << ": the bound is too loose to mean anything";
  }
}

TEST(RoundTrip, HalfTypes) {
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 1000.0f);
  std::vector<float> x(4096);
  for (auto& v : x) v = normal(rng);
  std::vector<std::uint16_t> h(x.size());
  std::vector<float> y(x.size());
  for (DType type : {DType::F16, DType::BF16}) {
    const float rel = type == DType::F16 ? std::ldexp(1.0f, -11) : std::ldexp(1.0f, -8);
    quantize_row(type, x.data(), h.data(), 4096);
    dequantize_row(type, h.data(), y.data(), 4096);
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_LE(std::fabs(x[i] - y[i]), std::fabs(x[i]) * rel + 1e-7f) << name(type);
  }
  quantize_row(DType::F32, x.data(), y.data(), 4096);
  EXPECT_EQ(x, y);
}

// ---- K-quants and importance-weighted encoding ------------------------------

constexpr DType kKQuants[] = {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr DType kLegacyBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0};

std::vector<float> gaussian(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  return x;
}

// Gaussian with 1% of the elements 10x larger: the outliers real weight
// matrices have, which stretch a block's range.
std::vector<float> with_outliers(std::size_t n, unsigned seed) {
  std::vector<float> x = gaussian(n, seed);
  std::mt19937 rng(seed + 1);
  for (auto& v : x)
    if (rng() % 100 == 0) v *= 10.0f;
  return x;
}

// x as rows of row_len, each encoded on its own (with importance per column,
// or none), then decoded.
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

std::vector<char> encoded(DType type, const std::vector<float>& x, const float* importance = nullptr) {
  std::vector<char> q(static_cast<std::size_t>(row_bytes(type, static_cast<std::int64_t>(x.size()))));
  quantize_row_weighted(type, x.data(), importance, q.data(), static_cast<std::int64_t>(x.size()));
  return q;
}

double relative_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double error = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    error += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    norm += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(error / norm);
}

// sum_i importance[i % row_len] * (x[i] - y[i])^2 over elements [begin, end).
double weighted_error(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& importance,
                      std::size_t begin = 0, std::size_t end = SIZE_MAX) {
  double error = 0.0;
  for (std::size_t i = begin; i < std::min(end, x.size()); ++i)
    error +=
        importance[i % importance.size()] * (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
  return error;
}

// Twice or more the relative RMS error a type makes on Gaussian rows: a bound
// for the checks that the search stays sane on unusual rows.
double sane_error(DType type) {
  switch (type) {
    case DType::Q2_K:
      return 0.4;
    case DType::Q3_K:
      return 0.25;
    default:
      return 0.1;
  }
}

TEST(KQuant, RoundTripErrorIsBounded) {
  // Relative RMS error over 64K elements, measured with a few percent of
  // headroom: the search gives Q2_K 0.263 / 0.269, Q3_K 0.143 / 0.185, Q4_K
  // 0.0701 / 0.0910, Q5_K 0.0345 / 0.0450 and Q6_K 0.0167 / 0.0263
  // (Gaussian / outliers) on rows of 4096.
  struct Case {
    DType type;
    double gaussian_bound;
    double outlier_bound;
  };
  const Case cases[] = {{DType::Q2_K, 0.272, 0.280},
                        {DType::Q3_K, 0.149, 0.193},
                        {DType::Q4_K, 0.073, 0.095},
                        {DType::Q5_K, 0.036, 0.047},
                        {DType::Q6_K, 0.0175, 0.0275}};
  const std::size_t n = 65536;
  const std::vector<float> g = gaussian(n, 11);
  const std::vector<float> o = with_outliers(n, 12);
  for (const std::int64_t row_len : {256, 512, 4096}) {
    double previous_gaussian = 1.0;
    double previous_outlier = 1.0;
    for (const Case& c : cases) {
      const double eg = relative_rms(g, round_trip(c.type, g, row_len));
      const double eo = relative_rms(o, round_trip(c.type, o, row_len));
      EXPECT_LT(eg, c.gaussian_bound) << name(c.type) << " rows of " << row_len;
      EXPECT_LT(eo, c.outlier_bound) << name(c.type) << " rows of " << row_len;
      // More bits, less error: Q6_K < Q5_K < Q4_K < Q3_K < Q2_K.
      EXPECT_LT(eg, previous_gaussian) << name(c.type);
      EXPECT_LT(eo, previous_outlier) << name(c.type);
      previous_gaussian = eg;
      previous_outlier = eo;
    }
    // Q4_K spends the same 4.5 bits per weight as Q4_0 and must not do worse.
    EXPECT_LE(relative_rms(g, round_trip(DType::Q4_K, g, row_len)),
              relative_rms(g, round_trip(DType::Q4_0, g, row_len)));
    EXPECT_LE(relative_rms(o, round_trip(DType::Q4_K, o, row_len)),
              relative_rms(o, round_trip(DType::Q4_0, o, row_len)));
  }
}

TEST(KQuant, EveryElementLandsNearItsValue) {
  // No element may be far off, whichever code it got: at most two steps of
  // its super-block's largest scale (Q2_K, Q4_K, Q5_K: 3, 15 or 31 steps span
  // a sub-block; Q3_K, Q6_K: 4 or 32 steps span half of it).
  const std::vector<float> x = with_outliers(16 * 256, 13);
  for (DType type : kKQuants) {
    const std::vector<float> y = round_trip(type, x, 4096);
    const float steps = type == DType::Q2_K   ? 3.0f
                        : type == DType::Q3_K ? 4.0f
                        : type == DType::Q4_K ? 15.0f
                        : type == DType::Q5_K ? 31.0f
                                              : 32.0f;
    for (std::size_t b = 0; b < x.size(); b += 256) {
      float amax = 0.0f;
      for (std::size_t j = b; j < b + 256; ++j) amax = std::max(amax, std::fabs(x[j]));
      for (std::size_t j = b; j < b + 256; ++j)
        ASSERT_LE(std::fabs(x[j] - y[j]), 2.0f * amax / steps) << name(type) << " element " << j;
    }
  }
}

TEST(KQuant, AllZeroSuperBlocksDecodeToZero) {
  std::vector<float> x = gaussian(1024, 14);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);                       // super-block 1: +0
  for (std::size_t j = 768; j < 1024; ++j) x[j] = (j % 2) ? -0.0f : 0.0f;  // super-block 3: mixed zeros
  for (DType type : kKQuants) {
    const std::vector<float> y = round_trip(type, x, 1024);
    for (std::size_t j = 256; j < 512; ++j) ASSERT_EQ(y[j], 0.0f) << name(type) << " " << j;
    for (std::size_t j = 768; j < 1024; ++j) ASSERT_EQ(y[j], 0.0f) << name(type) << " " << j;
    EXPECT_LT(
        relative_rms(std::vector<float>(x.begin(), x.begin() + 256), std::vector<float>(y.begin(), y.begin() + 256)),
        sane_error(type))
        << name(type);
    const std::vector<float> zeros(512, 0.0f);
    EXPECT_EQ(round_trip(type, zeros, 512), zeros) << name(type);
  }
}

TEST(KQuant, PositiveAndNegativeOnlyRows) {
  // All-positive sub-blocks need a min of 0 (mins are stored as -dmin * m with
  // m >= 0); all-negative ones use the min fully.
  std::vector<float> x = gaussian(4096, 15);
  for (std::size_t j = 0; j < 2048; ++j) x[j] = std::fabs(x[j]) + 0.5f;
  for (std::size_t j = 2048; j < 4096; ++j) x[j] = -std::fabs(x[j]) - 0.5f;
  for (DType type : kKQuants) EXPECT_LT(relative_rms(x, round_trip(type, x, 4096)), sane_error(type) / 2) << name(type);
}

TEST(KQuant, ExtremeMagnitudesStayFinite) {
  const std::vector<float> g = gaussian(256, 16);
  for (DType type : kKQuants) {
    for (const float scale : {1e-30f, 1e-10f, 1e-3f, 1e3f, 1e6f, 1e10f, 1e30f, 1e38f}) {
      std::vector<float> x(g);
      for (auto& v : x) v *= scale;
      const std::vector<float> y = round_trip(type, x, 256);
      for (std::size_t j = 0; j < y.size(); ++j)
        ASSERT_TRUE(std::isfinite(y[j])) << name(type) << " scale " << scale << " element " << j;
      // Where the f16 super-block scale can hold the scales, the usual accuracy.
      if (scale >= 1e-3f && scale <= 1e3f) {
        EXPECT_LT(relative_rms(x, y), sane_error(type)) << name(type) << " scale " << scale;
      }
    }
    // One huge element beside ordinary ones, and float's extremes.
    std::vector<float> x(g);
    x[7] = 3e38f;
    x[100] = -std::numeric_limits<float>::max();
    x[200] = std::numeric_limits<float>::denorm_min();
    for (const float v : round_trip(type, x, 256)) ASSERT_TRUE(std::isfinite(v)) << name(type);
  }
}

TEST(KQuant, RowsMustBeWholeSuperBlocks) {
  std::vector<float> x(1024, 1.0f);
  std::vector<char> q(1024);
  for (DType type : kKQuants) {
    for (const std::int64_t n : {32, 100, 300}) {
      try {
        quantize_row(type, x.data(), q.data(), n);
        FAIL() << "no error for " << n;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::string(name(type))), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
      }
      EXPECT_THROW(quantize_row_weighted(type, x.data(), x.data(), q.data(), n), Error);
    }
    EXPECT_NO_THROW(quantize_row(type, x.data(), q.data(), 0));
  }
}

TEST(KQuant, NonFiniteInputIsRefused) {
  std::vector<char> q(1024);
  for (DType type : kKQuants) {
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf}) {
      std::vector<float> x(512, 1.0f);
      x[300] = bad;
      try {
        quantize_row(type, x.data(), q.data(), 512);
        FAIL() << "no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("element 300"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(KQuant, QuantizeRowIsWeightedWithoutImportance) {
  const std::vector<float> x = with_outliers(2048, 17);
  for (DType type : kKQuants) {
    std::vector<char> plain(static_cast<std::size_t>(row_bytes(type, 2048)));
    quantize_row(type, x.data(), plain.data(), 2048);
    EXPECT_EQ(plain, encoded(type, x)) << name(type);
  }
}

TEST(WeightedQuantize, WithoutImportanceLegacyTypesAreQuantizeRow) {
  // Ordinary data and everything gguf defines for the edge cases: zeros, a
  // huge element, infinities, NaNs.
  std::vector<float> x = with_outliers(4096, 18);
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);
  x[200] = 1e30f;
  x[300] = kInf;
  x[400] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> importance = gaussian(4096, 19);
  for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_K, DType::F32,
                     DType::F16, DType::BF16}) {
    std::vector<char> plain(static_cast<std::size_t>(row_bytes(type, 4096)));
    quantize_row(type, x.data(), plain.data(), 4096);
    EXPECT_EQ(plain, encoded(type, x)) << name(type);
    if (type == DType::Q8_K || type == DType::F32 || type == DType::F16 || type == DType::BF16) {  // no search
      std::vector<float> positive(importance);
      for (auto& v : positive) v = std::fabs(v);
      EXPECT_EQ(plain, encoded(type, x, positive.data())) << name(type);
    }
  }
}

TEST(WeightedQuantize, LowersTheImportanceWeightedError) {
  // Every 37th column matters 100x more, as a few outlier channels of the
  // activations do. Encoding for that importance must cut the weighted error
  // well below what an unweighted encoding makes (measured: to 0.24-0.42 of it).
  std::vector<float> importance(4096, 1.0f);
  for (std::size_t j = 0; j < importance.size(); j += 37) importance[j] = 100.0f;
  const std::vector<float> x = gaussian(16 * 4096, 20);
  for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                     DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const double unweighted = weighted_error(x, round_trip(type, x, 4096), importance);
    const double weighted = weighted_error(x, round_trip(type, x, 4096, &importance), importance);
    EXPECT_LT(weighted, 0.6 * unweighted) << name(type);
  }
}

TEST(WeightedQuantize, LegacyTypesAreNeverWorseThanGguf) {
  // Block by block, whatever the importance: the gguf-exact encoding is one of
  // the candidates. Random importance spanning six decades, ordinary and
  // outlier data, and the edge cases of f16 scales.
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> decades(-3.0f, 3.0f);
  std::vector<float> importance(4096);
  for (auto& v : importance) v = std::pow(10.0f, decades(rng));
  std::fill(importance.begin() + 128, importance.begin() + 160, 0.0f);  // a block nobody cares about
  std::vector<float> x = with_outliers(8 * 4096, 22);
  for (std::size_t j = 0; j < 32; ++j) x[4096 + j] *= 1e-6f;  // tiny: subnormal f16 scales
  for (std::size_t j = 0; j < 32; ++j) x[8192 + j] *= 1e5f;   // huge: gguf's f16 scale overflows
  std::fill(x.begin() + 12288, x.begin() + 12320, 0.0f);
  for (DType type : kLegacyBlockTypes) {
    const std::vector<float> exact = round_trip(type, x, 4096);
    const std::vector<float> searched = round_trip(type, x, 4096, &importance);
    int num_better = 0;
    for (std::size_t b = 0; b < x.size(); b += 32) {
      const double e_exact = weighted_error(x, exact, importance, b, b + 32);
      const double e_searched = weighted_error(x, searched, importance, b, b + 32);
      ASSERT_FALSE(std::isnan(e_searched)) << name(type) << " block " << b / 32;
      if (std::isnan(e_exact)) continue;  // gguf's block decodes to infinities; ours must be finite (above)
      ASSERT_LE(e_searched, e_exact) << name(type) << " block " << b / 32;
      num_better += e_searched < e_exact;
    }
    EXPECT_GT(num_better, static_cast<int>(x.size() / 32 / 2)) << name(type) << ": the search rarely helps";
    for (std::size_t j = 8192; j < 8224; ++j) ASSERT_TRUE(std::isfinite(searched[j])) << name(type);
  }
}

TEST(WeightedQuantize, ZeroImportanceColumnsStaySane) {
  // Half of every super-block's importance is zero: those elements do not
  // count, but must still decode to finite values in the block's range.
  std::vector<float> importance(4096, 1.0f);
  for (std::size_t j = 0; j < importance.size(); ++j)
    if ((j / 64) % 2 == 0) importance[j] = 0.0f;
  const std::vector<float> all_zero(4096, 0.0f);
  const std::vector<float> x = gaussian(4 * 4096, 23);
  for (DType type : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                     DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const std::vector<float> y = round_trip(type, x, 4096, &importance);
    float amax = 0.0f;
    for (const float v : x) amax = std::max(amax, std::fabs(v));
    for (const float v : y) ASSERT_LE(std::fabs(v), 1.5f * amax) << name(type);
    // The columns that count are encoded at least as well as without
    // importance: guaranteed block by block for the 32-element types; the
    // K-quants' search is a heuristic whose super-block scales couple their
    // sub-blocks, so there it holds within a few percent.
    const bool k_quant = info(type).block_elems == 256;
    EXPECT_LE(weighted_error(x, y, importance),
              (k_quant ? 1.05 : 1.0) * weighted_error(x, round_trip(type, x, 4096), importance))
        << name(type);
    // All-zero importance is no information: K-quants encode as without it,
    // the 32-element types search for the plain squared error.
    if (k_quant) {
      const std::vector<float> row(x.begin(), x.begin() + 4096);
      EXPECT_EQ(encoded(type, row, all_zero.data()), encoded(type, row)) << name(type);
    } else {
      EXPECT_LE(relative_rms(x, round_trip(type, x, 4096, &all_zero)), relative_rms(x, round_trip(type, x, 4096)))
          << name(type);
    }
  }
}

TEST(WeightedQuantize, BadImportanceIsRefused) {
  std::vector<float> x(256, 1.0f);
  std::vector<char> q(1024);
  for (const float bad : {-1.0f, std::numeric_limits<float>::quiet_NaN(), kInf}) {
    std::vector<float> importance(256, 1.0f);
    importance[17] = bad;
    for (DType type : {DType::Q4_0, DType::Q4_K, DType::F16}) {
      try {
        quantize_row_weighted(type, x.data(), importance.data(), q.data(), 256);
        FAIL() << "no error for " << bad;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("importance[17]"), std::string::npos) << e.what();
      }
    }
  }
}

// ---- errors ----------------------------------------------------------------

TEST(Errors, RowsMustBeWholeBlocks) {
  std::vector<char> buf(1024);
  std::vector<float> out(256);
  EXPECT_THROW(dequantize_row(DType::Q4_0, buf.data(), out.data(), 33), Error);
  EXPECT_THROW(dequantize_row(DType::Q4_0, buf.data(), out.data(), -32), Error);
  EXPECT_THROW(dequantize_row(DType::Q6_K, buf.data(), out.data(), 32), Error);
  EXPECT_THROW(quantize_row(DType::Q8_0, out.data(), buf.data(), 16), Error);
  EXPECT_THROW(quantize_row(DType::F16, out.data(), buf.data(), -1), Error);
  EXPECT_NO_THROW(dequantize_row(DType::Q4_0, buf.data(), out.data(), 0));
  try {
    dequantize_row(DType::Q4_K, buf.data(), out.data(), 100);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_k"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
}

TEST(Errors, UnsupportedTypesAreNamed) {
  std::vector<char> buf(1024);
  std::vector<float> out(256);
  try {
    dequantize_row(DType::IQ2_XXS, buf.data(), out.data(), 256);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos) << e.what();
  }
  try {
    quantize_row(DType::IQ3_S, out.data(), buf.data(), 256);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iq3_s"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();  // says what does work
    EXPECT_NE(std::string(e.what()).find("q6_k"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quantize_row_weighted(DType::IQ3_S, out.data(), nullptr, buf.data(), 256), Error);
  EXPECT_THROW(quantize_row(DType::Q8_1, out.data(), buf.data(), 32), Error);
  EXPECT_THROW(dequantize_row(DType::Q8_1, buf.data(), out.data(), 32), Error);
}

}  // namespace
}  // namespace folio
