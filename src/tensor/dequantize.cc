// Reference dequantization: one plain loop per GGUF type, doing the same float
// operations in the same order as gguf.quants, so each output is bit-identical
// to the package's (NaN payloads included wherever IEEE 754 fixes them).
#include <cstring>
#include <string>

#include "core/error.h"
#include "tensor/half.h"
#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"

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

// q of element e (0..31) in the nibble layout of Q4_0, Q4_1 and the low bits of Q5_*.
int nibble(const std::uint8_t* qs, int e) { return e < kHalfBlock ? qs[e] & 0x0f : qs[e - kHalfBlock] >> 4; }

std::uint32_t load_u32(const std::uint8_t* bytes) {
  std::uint32_t value;
  std::memcpy(&value, bytes, sizeof(value));
  return value;
}

void decode_f32(const void* src, float* dst, std::int64_t num_blocks) {
  std::memcpy(dst, src, static_cast<std::size_t>(num_blocks) * sizeof(float));
}

void decode_f16(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i) dst[i] = f16_to_f32(load_block<std::uint16_t>(src, i));
}

void decode_bf16(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i) dst[i] = bf16_to_f32(load_block<std::uint16_t>(src, i));
}

void decode_q4_0(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kBlockElems) {
    const auto block = load_block<BlockQ4_0>(src, i);
    const float d = f16_to_f32(block.d);
    for (int e = 0; e < kBlockElems; ++e) dst[e] = d * static_cast<float>(nibble(block.qs, e) - 8);
  }
}

void decode_q4_1(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kBlockElems) {
    const auto block = load_block<BlockQ4_1>(src, i);
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    for (int e = 0; e < kBlockElems; ++e) dst[e] = d * static_cast<float>(nibble(block.qs, e)) + m;
  }
}

void decode_q5_0(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kBlockElems) {
    const auto block = load_block<BlockQ5_0>(src, i);
    const float d = f16_to_f32(block.d);
    const std::uint32_t qh = load_u32(block.qh);
    for (int e = 0; e < kBlockElems; ++e) {
      const int q = nibble(block.qs, e) | static_cast<int>(((qh >> e) & 1u) << 4);
      dst[e] = d * static_cast<float>(q - 16);
    }
  }
}

void decode_q5_1(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kBlockElems) {
    const auto block = load_block<BlockQ5_1>(src, i);
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    const std::uint32_t qh = load_u32(block.qh);
    for (int e = 0; e < kBlockElems; ++e) {
      const int q = nibble(block.qs, e) | static_cast<int>(((qh >> e) & 1u) << 4);
      dst[e] = d * static_cast<float>(q) + m;
    }
  }
}

void decode_q8_0(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kBlockElems) {
    const auto block = load_block<BlockQ8_0>(src, i);
    const float d = f16_to_f32(block.d);
    for (int e = 0; e < kBlockElems; ++e) dst[e] = d * static_cast<float>(block.qs[e]);
  }
}

// The 2-bit field of element e (0..255) in the layout Q2_K and Q3_K share:
// byte 32*(e/128) + e%32, bits 2*((e%128)/32) and up.
int crumb(const std::uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

void decode_q2_k(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kSuperBlockElems) {
    const auto block = load_block<BlockQ2_K>(src, i);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (int e = 0; e < kSuperBlockElems; ++e) {
      const std::uint8_t packed = block.scales[e / 16];
      const float scale = d * static_cast<float>(packed & 0x0f);
      const float min = dmin * static_cast<float>(packed >> 4);
      dst[e] = scale * static_cast<float>(crumb(block.qs, e)) - min;
    }
  }
}

// Q3_K's 6-bit scale of group g (0..15), still offset by 32.
int q3_k_scale(const std::uint8_t* scales, int g) {
  const int low = (scales[g % 8] >> (4 * (g / 8))) & 0x0f;
  const int high = (scales[8 + g % 4] >> (2 * (g / 4))) & 0x03;
  return low | (high << 4);
}

void decode_q3_k(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kSuperBlockElems) {
    const auto block = load_block<BlockQ3_K>(src, i);
    const float d = f16_to_f32(block.d);
    for (int e = 0; e < kSuperBlockElems; ++e) {
      const float scale = d * static_cast<float>(q3_k_scale(block.scales, e / 16) - 32);
      const bool high_bit = (block.hmask[e % 32] >> (e / 32)) & 1;
      const int q = crumb(block.qs, e) - (high_bit ? 0 : 4);
      dst[e] = scale * static_cast<float>(q);
    }
  }
}

// Q4_K/Q5_K's 6-bit scale and min of group g (0..7).
struct ScaleMin {
  int scale;
  int min;
};

ScaleMin q4_k_scale_min(const std::uint8_t* scales, int g) {
  if (g < 4) return {scales[g] & 0x3f, scales[g + 4] & 0x3f};
  return {(scales[g + 4] & 0x0f) | ((scales[g - 4] >> 6) << 4), (scales[g + 4] >> 4) | ((scales[g] >> 6) << 4)};
}

// The 4-bit field of element e (0..255) in the layout Q4_K and Q5_K share.
int k_nibble(const std::uint8_t* qs, int e) { return (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 0x0f; }

void decode_q4_k(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kSuperBlockElems) {
    const auto block = load_block<BlockQ4_K>(src, i);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (int e = 0; e < kSuperBlockElems; ++e) {
      const ScaleMin sm = q4_k_scale_min(block.scales, e / 32);
      const float scale = d * static_cast<float>(sm.scale);
      const float min = dmin * static_cast<float>(sm.min);
      dst[e] = scale * static_cast<float>(k_nibble(block.qs, e)) - min;
    }
  }
}

void decode_q5_k(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kSuperBlockElems) {
    const auto block = load_block<BlockQ5_K>(src, i);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (int e = 0; e < kSuperBlockElems; ++e) {
      const ScaleMin sm = q4_k_scale_min(block.scales, e / 32);
      const float scale = d * static_cast<float>(sm.scale);
      const float min = dmin * static_cast<float>(sm.min);
      const int q = k_nibble(block.qs, e) | (((block.qh[e % 32] >> (e / 32)) & 1) << 4);
      dst[e] = scale * static_cast<float>(q) - min;
    }
  }
}

void decode_q6_k(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kSuperBlockElems) {
    const auto block = load_block<BlockQ6_K>(src, i);
    const float d = f16_to_f32(block.d);
    for (int e = 0; e < kSuperBlockElems; ++e) {
      const int half = e / 128;
      const int r = e % 128;
      const int low = (block.ql[64 * half + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (block.qh[32 * half + r % 32] >> (2 * (r / 32))) & 0x03;
      const float scale = d * static_cast<float>(block.scales[e / 16]);
      dst[e] = scale * static_cast<float>((low | (high << 4)) - 32);
    }
  }
}

void decode_q8_k(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kSuperBlockElems) {
    const auto block = load_block<BlockQ8_K>(src, i);
    for (int e = 0; e < kSuperBlockElems; ++e) dst[e] = block.d * static_cast<float>(block.qs[e]);
  }
}

void decode_iq4_nl(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kBlockElems) {
    const auto block = load_block<BlockIQ4_NL>(src, i);
    const float d = f16_to_f32(block.d);
    for (int e = 0; e < kBlockElems; ++e) dst[e] = d * static_cast<float>(kIq4Values[nibble(block.qs, e)]);
  }
}

void decode_iq4_xs(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kSuperBlockElems) {
    const auto block = load_block<BlockIQ4_XS>(src, i);
    const float d = f16_to_f32(block.d);
    for (int g = 0; g < kSuperBlockElems / kBlockElems; ++g) {
      const int low = (block.scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
      const int high = (block.scales_h >> (2 * g)) & 0x03;
      const float scale = d * static_cast<float>((low | (high << 4)) - 32);
      const std::uint8_t* qs = block.qs + kHalfBlock * g;
      for (int e = 0; e < kBlockElems; ++e)
        dst[kBlockElems * g + e] = scale * static_cast<float>(kIq4Values[nibble(qs, e)]);
    }
  }
}

void decode_mxfp4(const void* src, float* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kBlockElems) {
    const auto block = load_block<BlockMXFP4>(src, i);
    const float d = e8m0_half_to_f32(block.e);
    for (int e = 0; e < kBlockElems; ++e) dst[e] = d * static_cast<float>(kFp4Values[nibble(block.qs, e)]);
  }
}

void decode_nvfp4(const void* src, float* dst, std::int64_t num_blocks) {
  constexpr int kHalfGroup = kNvfp4GroupElems / 2;
  for (std::int64_t i = 0; i < num_blocks; ++i, dst += kNvfp4Elems) {
    const auto block = load_block<BlockNVFP4>(src, i);
    for (int g = 0; g < kNvfp4Elems / kNvfp4GroupElems; ++g) {
      const float d = ue4m3_half_to_f32(block.d[g]);
      const std::uint8_t* qs = block.qs + kHalfGroup * g;
      for (int e = 0; e < kNvfp4GroupElems; ++e) {
        const int q = e < kHalfGroup ? qs[e] & 0x0f : qs[e - kHalfGroup] >> 4;
        dst[kNvfp4GroupElems * g + e] = d * static_cast<float>(kFp4Values[q]);
      }
    }
  }
}

using DecodeFn = void (*)(const void* src, float* dst, std::int64_t num_blocks);

struct Decoder {
  DType type;
  DecodeFn decode;
};

// Keep dtype.cc's `dequantizable` flags equal to this list (a test checks).
constexpr Decoder kDecoders[] = {
    {DType::F32, decode_f32},   {DType::F16, decode_f16},   {DType::BF16, decode_bf16},
    {DType::Q4_0, decode_q4_0}, {DType::Q4_1, decode_q4_1}, {DType::Q5_0, decode_q5_0},
    {DType::Q5_1, decode_q5_1}, {DType::Q8_0, decode_q8_0}, {DType::Q2_K, decode_q2_k},
    {DType::Q3_K, decode_q3_k}, {DType::Q4_K, decode_q4_k}, {DType::Q5_K, decode_q5_k},
    {DType::Q6_K, decode_q6_k}, {DType::Q8_K, decode_q8_k}, {DType::IQ4_NL, decode_iq4_nl},
    {DType::IQ4_XS, decode_iq4_xs}, {DType::MXFP4, decode_mxfp4}, {DType::NVFP4, decode_nvfp4},
};

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, std::int64_t n) {
  const DTypeInfo& t = info(type);
  DecodeFn decode = nullptr;
  for (const auto& d : kDecoders)
    if (d.type == type) decode = d.decode;
  if (decode == nullptr) {
    std::string known;
    for (const auto& d : kDecoders) known += std::string(known.empty() ? "" : ", ") + std::string(name(d.type));
    fail("folio has no dequantizer for {} tensors; it reads {}", t.name, known);
  }
  if (n < 0 || n % t.block_elems != 0)
    fail("cannot dequantize a row of {} {} elements: a row must be a whole number of blocks of {}", n, t.name,
         t.block_elems);
  decode(src, dst, n / t.block_elems);
}

}  // namespace folio
