// Reference quantization: float rows into GGUF blocks with the float32
// arithmetic of gguf.quants, step for step, so the bytes match the package's
// wherever its numpy code is defined (see to_code for where it is not); and
// the dispatch to the scale-searching encoders (weighted_encoders.h).
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"
#include "tensor/weighted_encoders.h"

// Bit-exactness needs every multiply and add rounded on its own: a compiler
// allowed to fuse them (GCC does so by default when FMA is enabled) would
// change results.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace folio {
namespace {

constexpr int kHalfBlock = kBlockElems / 2;

// The integer code of a value gguf has already truncated or rounded. numpy's
// cast to a small integer is undefined for NaN, infinities and out-of-range
// values (the product of an infinite input, or of an infinite inverse scale);
// folio defines them: a non-finite value is code 0, a finite one saturates to
// [lo, hi]. Where numpy is defined, this is the same number (and on x86,
// where a failed conversion yields 0x80000000, numpy's undefined ones are 0 too).
int to_code(float v, int lo, int hi) {
  if (!std::isfinite(v)) return 0;
  if (v < static_cast<float>(lo)) return lo;
  if (v > static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// numpy's argmax(abs(x)): the first element of largest magnitude, or the first NaN.
int argmax_abs(const float* x, int count) {
  int best = 0;
  for (int j = 0; j < count; ++j) {
    if (std::isnan(x[j])) return j;
    if (std::fabs(x[j]) > std::fabs(x[best])) best = j;
  }
  return best;
}

// numpy's max/min of a block propagate NaN. Which NaN numpy returns depends on
// its SIMD path; folio returns the first one.
struct Range {
  float min;
  float max;
};

Range range_of(const float* x, int count) {
  Range r{x[0], x[0]};
  for (int j = 0; j < count; ++j) {
    if (std::isnan(x[j])) return {x[j], x[j]};
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

// gguf's np.where(d == 0, 0, 1 / d).
float inverse_or_zero(float d) { return d == 0.0f ? 0.0f : 1.0f / d; }

// Codes 0..31 into the nibble layout of Q4_*/Q5_* (low 4 bits only).
void pack_nibbles(const int* q, std::uint8_t* qs) {
  for (int j = 0; j < kHalfBlock; ++j)
    qs[j] = static_cast<std::uint8_t>((q[j] & 0x0f) | ((q[j + kHalfBlock] & 0x0f) << 4));
}

// Bit 4 of each code, element j at bit j of a little-endian u32.
void pack_high_bits(const int* q, std::uint8_t* qh) {
  std::uint32_t bits = 0;
  for (int j = 0; j < kBlockElems; ++j) bits |= static_cast<std::uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, sizeof(bits));
}

void encode_f32(const float* x, void* dst, std::int64_t num_blocks) {
  std::memcpy(dst, x, static_cast<std::size_t>(num_blocks) * sizeof(float));
}

void encode_f16(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i) store_block<std::uint16_t>(dst, i, f32_to_f16(x[i]));
}

void encode_bf16(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i) store_block<std::uint16_t>(dst, i, f32_to_bf16(x[i]));
}

// Symmetric 4 and 5 bits: the scale carries the sign of the largest-magnitude
// element, which then lands exactly on the lowest code.
template <typename Block, int kOffset>
Block encode_symmetric(const float* x, int (&q)[kBlockElems]) {
  const float d = x[argmax_abs(x, kBlockElems)] / static_cast<float>(-kOffset);
  const float id = inverse_or_zero(d);
  for (int j = 0; j < kBlockElems; ++j)
    q[j] = to_code(std::trunc(x[j] * id + (static_cast<float>(kOffset) + 0.5f)), 0, 2 * kOffset - 1);
  Block block{};
  block.d = f32_to_f16(d);
  pack_nibbles(q, block.qs);
  return block;
}

// Asymmetric 4 and 5 bits: codes count steps of d up from the block's minimum.
template <typename Block, int kMaxCode>
Block encode_affine(const float* x, int (&q)[kBlockElems]) {
  const Range r = range_of(x, kBlockElems);
  const float d = (r.max - r.min) / static_cast<float>(kMaxCode);
  const float id = inverse_or_zero(d);
  for (int j = 0; j < kBlockElems; ++j) q[j] = to_code(std::trunc((x[j] - r.min) * id + 0.5f), 0, kMaxCode);
  Block block{};
  block.d = f32_to_f16(d);
  block.m = f32_to_f16(r.min);
  pack_nibbles(q, block.qs);
  return block;
}

void encode_q4_0(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems) {
    int q[kBlockElems];
    store_block(dst, i, encode_symmetric<BlockQ4_0, 8>(x, q));
  }
}

void encode_q5_0(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems) {
    int q[kBlockElems];
    auto block = encode_symmetric<BlockQ5_0, 16>(x, q);
    pack_high_bits(q, block.qh);
    store_block(dst, i, block);
  }
}

void encode_q4_1(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems) {
    int q[kBlockElems];
    store_block(dst, i, encode_affine<BlockQ4_1, 15>(x, q));
  }
}

void encode_q5_1(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems) {
    int q[kBlockElems];
    auto block = encode_affine<BlockQ5_1, 31>(x, q);
    pack_high_bits(q, block.qh);
    store_block(dst, i, block);
  }
}

void encode_q8_0(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems) {
    float amax = 0.0f;
    for (int j = 0; j < kBlockElems; ++j) {
      if (std::isnan(x[j])) {
        amax = std::fabs(x[j]);
        break;
      }
      amax = std::fmax(amax, std::fabs(x[j]));
    }
    const float d = amax / 127.0f;
    const float id = inverse_or_zero(d);
    BlockQ8_0 block{};
    block.d = f32_to_f16(d);
    // std::round is gguf's np_roundf: halves away from zero.
    for (int j = 0; j < kBlockElems; ++j)
      block.qs[j] = static_cast<std::int8_t>(to_code(std::round(x[j] * id), -127, 127));
    store_block(dst, i, block);
  }
}

// Q8_K, which gguf.quants lacks, follows the GGUF reference definition: the
// largest-magnitude element (NaNs take no part) maps to -127, codes round to
// nearest even, d is the float 1 / iscale, and an all-zero block is all zeros.
void encode_q8_k(const float* x, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kSuperBlockElems) {
    BlockQ8_K block{};
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kSuperBlockElems; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax != 0.0f) {
      const float iscale = -127.0f / max;
      // nearbyint rounds halves to even in the default rounding mode, as the
      // reference's float-magic rounding does.
      for (int j = 0; j < kSuperBlockElems; ++j)
        block.qs[j] = static_cast<std::int8_t>(to_code(std::nearbyint(iscale * x[j]), -127, 127));
      for (int g = 0; g < kSuperBlockElems / 16; ++g) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += block.qs[16 * g + j];
        block.bsums[g] = static_cast<std::int16_t>(sum);
      }
      block.d = 1.0f / iscale;
    }
    store_block(dst, i, block);
  }
}

using EncodeFn = void (*)(const float* src, void* dst, std::int64_t num_blocks);

// A type's encoders: `exact` reproduces gguf's bytes, `weighted` searches
// scales for the least importance-weighted error (see quantize.h for when each
// runs). Either may be missing.
struct Encoder {
  DType type;
  EncodeFn exact;
  WeightedEncodeFn weighted;
};

constexpr Encoder kEncoders[] = {
    {DType::F32, encode_f32, nullptr},
    {DType::F16, encode_f16, nullptr},
    {DType::BF16, encode_bf16, nullptr},
    {DType::Q4_0, encode_q4_0, encode_weighted_q4_0},
    {DType::Q4_1, encode_q4_1, encode_weighted_q4_1},
    {DType::Q5_0, encode_q5_0, encode_weighted_q5_0},
    {DType::Q5_1, encode_q5_1, encode_weighted_q5_1},
    {DType::Q8_0, encode_q8_0, encode_weighted_q8_0},
    {DType::Q8_K, encode_q8_k, nullptr},
    {DType::Q2_K, nullptr, encode_q2_k},
    {DType::Q3_K, nullptr, encode_q3_k},
    {DType::Q4_K, nullptr, encode_q4_k},
    {DType::Q5_K, nullptr, encode_q5_k},
    {DType::Q6_K, nullptr, encode_q6_k},
    {DType::IQ4_NL, nullptr, encode_iq4_nl},
    {DType::IQ4_XS, nullptr, encode_iq4_xs},
    {DType::MXFP4, encode_mxfp4, encode_weighted_mxfp4},
    {DType::NVFP4, nullptr, encode_nvfp4},
};

const Encoder* find_encoder(DType type) {
  for (const auto& e : kEncoders)
    if (e.type == type) return &e;
  return nullptr;
}

// The encoder for a row of n elements of `type`, or a clear error.
const Encoder& checked_encoder(DType type, std::int64_t n) {
  const DTypeInfo& t = info(type);
  const Encoder* encoder = find_encoder(type);
  if (encoder == nullptr) {
    std::string known;
    for (const auto& e : kEncoders) known += std::string(known.empty() ? "" : ", ") + std::string(name(e.type));
    fail("folio cannot quantize to {}; it quantizes to {}", t.name, known);
  }
  if (n < 0 || n % t.block_elems != 0)
    fail("cannot quantize a row of {} elements to {}: a row must be a whole number of blocks of {}", n, t.name,
         t.block_elems);
  return *encoder;
}

}  // namespace

bool can_quantize(DType type) { return find_encoder(type) != nullptr; }

void quantize_row(DType type, const float* src, void* dst, std::int64_t n) {
  const Encoder& encoder = checked_encoder(type, n);
  const std::int64_t num_blocks = n / info(type).block_elems;
  if (encoder.exact != nullptr)
    encoder.exact(src, dst, num_blocks);
  else
    encoder.weighted(src, nullptr, dst, num_blocks);
}

void quantize_row_weighted(DType type, const float* src, const float* importance, void* dst, std::int64_t n) {
  const Encoder& encoder = checked_encoder(type, n);
  if (importance != nullptr) {
    for (std::int64_t j = 0; j < n; ++j)
      if (!(importance[j] >= 0.0f) || !std::isfinite(importance[j]))
        fail("importance[{}] is {}; importance must be finite and non-negative (e.g. mean squared activations)", j,
             importance[j]);
  }
  const std::int64_t num_blocks = n / info(type).block_elems;
  if (encoder.weighted != nullptr && (importance != nullptr || encoder.exact == nullptr))
    encoder.weighted(src, importance, dst, num_blocks);
  else
    encoder.exact(src, dst, num_blocks);
}

}  // namespace folio
