// The byte layouts of GGUF's quantized blocks, field by field as they lie in a
// file (little-endian, no padding); the static_asserts pin every size and
// offset, and dtype.cc's block_bytes must agree with them.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace folio {

static_assert(std::endian::native == std::endian::little, "GGUF blocks are little-endian; so must the host be");

inline constexpr int kBlockElems = 32;         // elements in a Q4_0 .. Q8_1 block
inline constexpr int kSuperBlockElems = 256;   // elements in a K-quant super-block
inline constexpr int kPackedScaleBytes = 12;   // 6-bit scales: Q3_K's 16, or Q4_K/Q5_K's 8 scales + 8 mins

// Fields named d, m, dmin and s hold IEEE binary16 bit patterns (see half.h),
// except Q8_K's d, which is a float. "q" is an element's integer code.

// x = d * (q - 8), q in [0, 15].
struct BlockQ4_0 {
  std::uint16_t d;
  std::uint8_t qs[kBlockElems / 2];  // q of element j in the low nibble of qs[j], of j+16 in the high one
};

// x = d * q + m, q in [0, 15].
struct BlockQ4_1 {
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qs[kBlockElems / 2];  // as Q4_0
};

// x = d * (q - 16), q in [0, 31].
struct BlockQ5_0 {
  std::uint16_t d;
  std::uint8_t qh[4];                // bit j of this little-endian u32 is bit 4 of element j's q
  std::uint8_t qs[kBlockElems / 2];  // low 4 bits, laid out as Q4_0
};

// x = d * q + m, q in [0, 31].
struct BlockQ5_1 {
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qh[4];
  std::uint8_t qs[kBlockElems / 2];
};

// x = d * q, q in [-127, 127].
struct BlockQ8_0 {
  std::uint16_t d;
  std::int8_t qs[kBlockElems];
};

// As Q8_0 plus s = d * sum(q): an intermediate for dot products, never stored
// in model files.
struct BlockQ8_1 {
  std::uint16_t d;
  std::uint16_t s;
  std::int8_t qs[kBlockElems];
};

// 16 groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4),
// q in [0, 3]. Element 128*h + 32*k + l has q = (qs[32*h + l] >> 2k) & 3.
struct BlockQ2_K {
  std::uint8_t scales[kSuperBlockElems / 16];
  std::uint8_t qs[kSuperBlockElems / 4];
  std::uint16_t d;
  std::uint16_t dmin;
};

// 16 groups of 16: x = d * (scale[g] - 32) * q, q in [-4, 3]; the low two bits
// of q as in Q2_K, and q -= 4 unless bit (e / 32) of hmask[e % 32] is set.
// The 6-bit scale of group g: low 4 bits from scales[g % 8] >> 4*(g / 8),
// high 2 bits from scales[8 + g % 4] >> 2*(g / 4).
struct BlockQ3_K {
  std::uint8_t hmask[kSuperBlockElems / 8];
  std::uint8_t qs[kSuperBlockElems / 4];
  std::uint8_t scales[kPackedScaleBytes];
  std::uint16_t d;
};

// 8 groups of 32: x = d * scale[g] * q - dmin * min[g], q in [0, 15].
// Element 64*c + 32*k + l has q = (qs[32*c + l] >> 4k) & 15. For g < 4 the
// 6-bit scale and min are the low bits of scales[g] and scales[g + 4]; for
// g >= 4 their low nibbles are scales[g + 4] & 15 and >> 4, their top two bits
// the top two bits of scales[g - 4] and scales[g].
struct BlockQ4_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[kPackedScaleBytes];
  std::uint8_t qs[kSuperBlockElems / 2];
};

// As Q4_K with q in [0, 31]: bit 4 of element e is bit (e / 32) of qh[e % 32].
struct BlockQ5_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[kPackedScaleBytes];
  std::uint8_t qh[kSuperBlockElems / 8];
  std::uint8_t qs[kSuperBlockElems / 2];
};

// 16 groups of 16: x = d * scales[g] * (q - 32), q in [0, 63]. Element
// 128*h + r: low nibble from ql[64*h + r % 64] >> 4*(r / 64), top two bits from
// qh[32*h + r % 32] >> 2*(r / 32).
struct BlockQ6_K {
  std::uint8_t ql[kSuperBlockElems / 2];
  std::uint8_t qh[kSuperBlockElems / 4];
  std::int8_t scales[kSuperBlockElems / 16];
  std::uint16_t d;
};

// x = d * q with a float d: the activation format K-quant dot products use.
struct BlockQ8_K {
  float d;
  std::int8_t qs[kSuperBlockElems];
  std::int16_t bsums[kSuperBlockElems / 16];  // sum of each group of 16 q
};

// The non-linear 4-bit grid of IQ4_NL and IQ4_XS: x = d * kIq4Values[q],
// q in [0, 15]. The values are GGUF's; they are sorted.
inline constexpr std::int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                               1,    13,   25,  38,  53,  69,  89,  113};

// FP4 (E2M1) values doubled, so that they are integers: the grid of MXFP4 and
// NVFP4, whose scales are stored halved to match. Code 8 is -0.
inline constexpr std::int8_t kFp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// x = d * kIq4Values[q]: Q4_0 with a non-linear grid.
struct BlockIQ4_NL {
  std::uint16_t d;
  std::uint8_t qs[kBlockElems / 2];  // as Q4_0
};

// 8 groups of 32: x = d * (scale[g] - 32) * kIq4Values[q], scale[g] 6 bits:
// low 4 from scales_l[g / 2] >> 4*(g % 2), high 2 from scales_h >> 2g.
// Group g's codes are qs[16 g .. 16 g + 16) in the layout of Q4_0.
struct BlockIQ4_XS {
  std::uint16_t d;
  std::uint16_t scales_h;
  std::uint8_t scales_l[kSuperBlockElems / 64];
  std::uint8_t qs[kSuperBlockElems / 2];
};

// x = e8m0_half(e) * kFp4Values[q]: an OCP microscaling block, with a shared
// power-of-two scale; codes in the layout of Q4_0.
struct BlockMXFP4 {
  std::uint8_t e;
  std::uint8_t qs[kBlockElems / 2];
};

inline constexpr int kNvfp4Elems = 64;     // elements in an NVFP4 block
inline constexpr int kNvfp4GroupElems = 16;  // elements per scale

// 4 groups of 16: x = ue4m3_half(d[g]) * kFp4Values[q]. Group g's codes are
// qs[8 g .. 8 g + 8): element 16 g + i in the low nibble of qs[8 g + i], element
// 16 g + 8 + i in the high one.
struct BlockNVFP4 {
  std::uint8_t d[kNvfp4Elems / kNvfp4GroupElems];
  std::uint8_t qs[kNvfp4Elems / 2];
};

static_assert(sizeof(BlockQ4_0) == 18 && offsetof(BlockQ4_0, qs) == 2);
static_assert(sizeof(BlockQ4_1) == 20 && offsetof(BlockQ4_1, qs) == 4);
static_assert(sizeof(BlockQ5_0) == 22 && offsetof(BlockQ5_0, qh) == 2 && offsetof(BlockQ5_0, qs) == 6);
static_assert(sizeof(BlockQ5_1) == 24 && offsetof(BlockQ5_1, qh) == 4 && offsetof(BlockQ5_1, qs) == 8);
static_assert(sizeof(BlockQ8_0) == 34 && offsetof(BlockQ8_0, qs) == 2);
static_assert(sizeof(BlockQ8_1) == 36 && offsetof(BlockQ8_1, qs) == 4);
static_assert(sizeof(BlockQ2_K) == 84 && offsetof(BlockQ2_K, d) == 80 && offsetof(BlockQ2_K, dmin) == 82);
static_assert(sizeof(BlockQ3_K) == 110 && offsetof(BlockQ3_K, scales) == 96 && offsetof(BlockQ3_K, d) == 108);
static_assert(sizeof(BlockQ4_K) == 144 && offsetof(BlockQ4_K, scales) == 4 && offsetof(BlockQ4_K, qs) == 16);
static_assert(sizeof(BlockQ5_K) == 176 && offsetof(BlockQ5_K, qh) == 16 && offsetof(BlockQ5_K, qs) == 48);
static_assert(sizeof(BlockQ6_K) == 210 && offsetof(BlockQ6_K, qh) == 128 && offsetof(BlockQ6_K, d) == 208);
static_assert(sizeof(BlockQ8_K) == 292 && offsetof(BlockQ8_K, qs) == 4 && offsetof(BlockQ8_K, bsums) == 260);

static_assert(sizeof(BlockIQ4_NL) == 18 && offsetof(BlockIQ4_NL, qs) == 2);
static_assert(sizeof(BlockIQ4_XS) == 136 && offsetof(BlockIQ4_XS, scales_l) == 4 && offsetof(BlockIQ4_XS, qs) == 8);
static_assert(sizeof(BlockMXFP4) == 17 && offsetof(BlockMXFP4, qs) == 1);
static_assert(sizeof(BlockNVFP4) == 36 && offsetof(BlockNVFP4, qs) == 4);

// MXFP4's E8M0 scale byte as the float 2^(e - 128): half of the exponent's
// power of two, to match the doubled kFp4Values. e = 0 and 1 give float
// subnormals; no byte is NaN.
inline float e8m0_half_to_f32(std::uint8_t e) {
  const std::uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<std::uint32_t>(e - 1) << 23;
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// NVFP4's unsigned E4M3 scale byte (bias 7, bit 7 ignored) as float, halved to
// match the doubled kFp4Values. 0x7f (E4M3's NaN) and 0 decode to 0; every
// other value is exact in float.
inline float ue4m3_half_to_f32(std::uint8_t x) {
  if (x == 0 || x == 0x7f) return 0.0f;
  const int exp = (x >> 3) & 0x0f;
  const int man = x & 0x07;
  const float raw = exp == 0 ? static_cast<float>(man) * 0x1p-9f
                             : (1.0f + static_cast<float>(man) / 8.0f) * std::ldexp(1.0f, exp - 7);
  return raw * 0.5f;
}

// Block i of a row. Rows come from files and buffers at any byte offset, so
// blocks are copied, never dereferenced in place.
template <typename Block>
Block load_block(const void* row, std::int64_t i) {
  static_assert(std::is_trivially_copyable_v<Block>);
  Block block;
  std::memcpy(&block, static_cast<const std::byte*>(row) + i * static_cast<std::int64_t>(sizeof(Block)), sizeof(Block));
  return block;
}

template <typename Block>
void store_block(void* row, std::int64_t i, const Block& block) {
  static_assert(std::is_trivially_copyable_v<Block>);
  std::memcpy(static_cast<std::byte*>(row) + i * static_cast<std::int64_t>(sizeof(Block)), &block, sizeof(Block));
}

}  // namespace folio
