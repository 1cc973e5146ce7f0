// GGUF blocks decoded on the GPU, 32 numbers at a time: sub-block s of a
// row is elements [32 s, 32 s + 32) (a whole Q4_0 .. Q8_0 block, one eighth
// of a K-quant super-block, or 32 plain numbers). Each decoder does the float
// operations of tensor/dequantize.cc in the same order, each rounded on its
// own (number_formats.cuh), so the floats are the reference's bit for bit,
// on the device and in the host-side test that checks them.
#pragma once

#include <cstdint>

#include "backend/cuda/number_formats.cuh"
#include "tensor/dtype.h"

namespace folio::cuda {

__host__ __device__ __forceinline__ std::uint16_t u16_at(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
__host__ __device__ __forceinline__ float f16_at(const std::uint8_t* p) { return f16_bits_to_f32(u16_at(p)); }

// GGUF's block bytes per type (tensor/dtype.cc), for the types kernels read.
template <DType T>
constexpr int kBlockBytes = T == DType::Q4_0   ? 18
                            : T == DType::Q4_1 ? 20
                            : T == DType::Q5_0 ? 22
                            : T == DType::Q5_1 ? 24
                            : T == DType::Q8_0 ? 34
                            : T == DType::Q2_K ? 84
                            : T == DType::Q3_K ? 110
                            : T == DType::Q4_K ? 144
                            : T == DType::Q5_K ? 176
                            : T == DType::Q6_K ? 210
                            : T == DType::IQ4_NL ? 18
                            : T == DType::IQ4_XS ? 136
                            : T == DType::MXFP4 ? 17
                            : T == DType::NVFP4 ? 36
                                               : 0;

// The grids of tensor/quant_blocks.h (kIq4Values, kFp4Values), as device code can read them.
__host__ __device__ __forceinline__ float iq4_value(int q) {
  constexpr std::int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return static_cast<float>(kValues[q]);
}
__host__ __device__ __forceinline__ float fp4_value(int q) {
  constexpr std::int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return static_cast<float>(kValues[q]);
}

// quant_blocks.h's e8m0_half_to_f32 and ue4m3_half_to_f32, exact.
__host__ __device__ __forceinline__ float e8m0_half_to_f32(std::uint8_t e) {
  return float_of(e < 2 ? 0x00200000u << e : static_cast<std::uint32_t>(e - 1) << 23);
}
__host__ __device__ __forceinline__ float ue4m3_half_to_f32(std::uint8_t x) {
  if (x == 0 || x == 0x7f) return 0.0f;
  const int exp = (x >> 3) & 0x0f, man = x & 0x07;
  if (exp == 0) return mul_rn(static_cast<float>(man), 0x1p-10f);
  // (1 + man / 8) * 2^(exp - 7) / 2: biased exponent exp - 8 + 127.
  return float_of(static_cast<std::uint32_t>(exp + 119) << 23 | static_cast<std::uint32_t>(man) << 20);
}

// out[0, 32) = elements [32 s, 32 s + 32) of a row of k numbers; for the
// plain types, elements at or past k are 0.
template <DType T>
__host__ __device__ __forceinline__ void dequant32(const std::uint8_t* row, std::int64_t s, std::int64_t k,
                                                   float* out) {
  if constexpr (T == DType::F32 || T == DType::F16 || T == DType::BF16) {
    const std::int64_t first = 32 * s;
    FOLIO_UNROLL
    for (int e = 0; e < 32; ++e) {
      const std::int64_t i = first + e;
      float v = 0.0f;
      if (i < k) {
        if constexpr (T == DType::F32) v = reinterpret_cast<const float*>(row)[i];
        if constexpr (T == DType::F16) v = f16_bits_to_f32(reinterpret_cast<const std::uint16_t*>(row)[i]);
        if constexpr (T == DType::BF16) v = bf16_bits_to_f32(reinterpret_cast<const std::uint16_t*>(row)[i]);
      }
      out[e] = v;
    }
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1) {
    const std::uint8_t* b = row + s * kBlockBytes<T>;
    const float d = f16_at(b);
    constexpr bool has_min = T == DType::Q4_1 || T == DType::Q5_1;
    const float m = has_min ? f16_at(b + 2) : 0.0f;
    constexpr int qh_at = T == DType::Q5_0 ? 2 : 4;
    constexpr int qs_at = T == DType::Q4_0 ? 2 : T == DType::Q4_1 ? 4 : T == DType::Q5_0 ? 6 : 8;
    std::uint32_t qh = 0;
    if constexpr (T == DType::Q5_0 || T == DType::Q5_1)
      qh = b[qh_at] | (b[qh_at + 1] << 8) | (b[qh_at + 2] << 16) | (static_cast<std::uint32_t>(b[qh_at + 3]) << 24);
    FOLIO_UNROLL
    for (int e = 0; e < 32; ++e) {
      int q = e < 16 ? (b[qs_at + e] & 0x0f) : (b[qs_at + e - 16] >> 4);
      if constexpr (T == DType::Q5_0 || T == DType::Q5_1) q |= static_cast<int>(((qh >> e) & 1u) << 4);
      if constexpr (T == DType::Q4_0) out[e] = mul_rn(d, static_cast<float>(q - 8));
      if constexpr (T == DType::Q5_0) out[e] = mul_rn(d, static_cast<float>(q - 16));
      if constexpr (has_min) out[e] = add_rn(mul_rn(d, static_cast<float>(q)), m);
    }
  } else if constexpr (T == DType::Q8_0) {
    const std::uint8_t* b = row + s * 34;
    const float d = f16_at(b);
    FOLIO_UNROLL
    for (int e = 0; e < 32; ++e) out[e] = mul_rn(d, static_cast<float>(static_cast<std::int8_t>(b[2 + e])));
  } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
    const std::uint8_t* b = row + (s / 8) * kBlockBytes<T>;
    const int g = static_cast<int>(s % 8);  // elements 32 g .. 32 g + 31 of the super-block
    const std::uint8_t* qs = b + (T == DType::Q2_K ? 16 : 32);
    const int shift = 2 * (g % 4);
    const std::uint8_t* q_row = qs + 32 * (g / 4);
    if constexpr (T == DType::Q2_K) {
      const float d = f16_at(b + 80), dmin = f16_at(b + 82);
      FOLIO_UNROLL
      for (int half = 0; half < 2; ++half) {
        const std::uint8_t packed = b[2 * g + half];  // scale of elements (32 g + 16 half) / 16
        const float scale = mul_rn(d, static_cast<float>(packed & 0x0f));
        const float min = mul_rn(dmin, static_cast<float>(packed >> 4));
        FOLIO_UNROLL
        for (int l = 0; l < 16; ++l) {
          const int q = (q_row[16 * half + l] >> shift) & 3;
          out[16 * half + l] = sub_rn(mul_rn(scale, static_cast<float>(q)), min);
        }
      }
    } else {
      const std::uint8_t* hmask = b;
      const std::uint8_t* scales = b + 96;
      const float d = f16_at(b + 108);
      FOLIO_UNROLL
      for (int half = 0; half < 2; ++half) {
        const int group = 2 * g + half;
        const int low = (scales[group % 8] >> (4 * (group / 8))) & 0x0f;
        const int high = (scales[8 + group % 4] >> (2 * (group / 4))) & 0x03;
        const float scale = mul_rn(d, static_cast<float>((low | (high << 4)) - 32));
        FOLIO_UNROLL
        for (int l = 0; l < 16; ++l) {
          const int e = 32 * g + 16 * half + l;
          const bool high_bit = (hmask[e % 32] >> (e / 32)) & 1;
          const int q = ((q_row[16 * half + l] >> shift) & 3) - (high_bit ? 0 : 4);
          out[16 * half + l] = mul_rn(scale, static_cast<float>(q));
        }
      }
    }
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    const std::uint8_t* b = row + (s / 8) * kBlockBytes<T>;
    const int g = static_cast<int>(s % 8);
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const std::uint8_t* sc = b + 4;
    int scale_bits, min_bits;
    if (g < 4) {
      scale_bits = sc[g] & 0x3f;
      min_bits = sc[g + 4] & 0x3f;
    } else {
      scale_bits = (sc[g + 4] & 0x0f) | ((sc[g - 4] >> 6) << 4);
      min_bits = (sc[g + 4] >> 4) | ((sc[g] >> 6) << 4);
    }
    const float scale = mul_rn(d, static_cast<float>(scale_bits));
    const float min = mul_rn(dmin, static_cast<float>(min_bits));
    const std::uint8_t* qs = b + (T == DType::Q4_K ? 16 : 48) + 32 * (g / 2);
    const int shift = 4 * (g % 2);
    FOLIO_UNROLL
    for (int l = 0; l < 32; ++l) {
      int q = (qs[l] >> shift) & 0x0f;
      if constexpr (T == DType::Q5_K) q |= ((b[16 + l] >> g) & 1) << 4;
      out[l] = sub_rn(mul_rn(scale, static_cast<float>(q)), min);
    }
  } else if constexpr (T == DType::IQ4_NL || T == DType::MXFP4) {
    const std::uint8_t* b = row + s * kBlockBytes<T>;
    const float d = T == DType::IQ4_NL ? f16_at(b) : e8m0_half_to_f32(b[0]);
    const std::uint8_t* qs = b + (T == DType::IQ4_NL ? 2 : 1);
    FOLIO_UNROLL
    for (int e = 0; e < 32; ++e) {
      const int q = e < 16 ? (qs[e] & 0x0f) : (qs[e - 16] >> 4);
      out[e] = mul_rn(d, T == DType::IQ4_NL ? iq4_value(q) : fp4_value(q));
    }
  } else if constexpr (T == DType::IQ4_XS) {
    const std::uint8_t* b = row + (s / 8) * 136;
    const int g = static_cast<int>(s % 8);
    const int low = (b[4 + g / 2] >> (4 * (g % 2))) & 0x0f;
    const int high = (u16_at(b + 2) >> (2 * g)) & 0x03;
    const float scale = mul_rn(f16_at(b), static_cast<float>((low | (high << 4)) - 32));
    const std::uint8_t* qs = b + 8 + 16 * g;
    FOLIO_UNROLL
    for (int e = 0; e < 32; ++e) {
      const int q = e < 16 ? (qs[e] & 0x0f) : (qs[e - 16] >> 4);
      out[e] = mul_rn(scale, iq4_value(q));
    }
  } else if constexpr (T == DType::NVFP4) {
    const std::uint8_t* b = row + (s / 2) * 36;
    const int half = static_cast<int>(s % 2);  // groups 2 half and 2 half + 1 of the block
    FOLIO_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int g = 2 * half + h;
      const float d = ue4m3_half_to_f32(b[g]);
      const std::uint8_t* qs = b + 4 + 8 * g;
      FOLIO_UNROLL
      for (int e = 0; e < 16; ++e) {
        const int q = e < 8 ? (qs[e] & 0x0f) : (qs[e - 8] >> 4);
        out[16 * h + e] = mul_rn(d, fp4_value(q));
      }
    }
  } else if constexpr (T == DType::Q6_K) {
    const std::uint8_t* b = row + (s / 8) * 210;
    const int g = static_cast<int>(s % 8);
    const int half = g / 4;       // which 128 of the 256
    const int r0 = 32 * (g % 4);  // first r of these 32 within the half
    const std::uint8_t* ql = b + 64 * half;
    const std::uint8_t* qh = b + 128 + 32 * half;
    const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
    const float d = f16_at(b + 208);
    FOLIO_UNROLL
    for (int l = 0; l < 32; ++l) {
      const int r = r0 + l;
      const int low = (ql[r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (qh[r % 32] >> (2 * (r / 32))) & 0x03;
      const float scale = mul_rn(d, static_cast<float>(scales[(128 * half + r) / 16]));
      out[l] = mul_rn(scale, static_cast<float>((low | (high << 4)) - 32));
    }
  }
}

// The weight types the kernels read.
__host__ __device__ constexpr bool is_kernel_weight_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q4_0 || t == DType::Q4_1 ||
         t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 || t == DType::Q2_K || t == DType::Q3_K ||
         t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K || t == DType::IQ4_NL || t == DType::IQ4_XS ||
         t == DType::MXFP4 || t == DType::NVFP4;
}

// dequant32 with the type chosen at run time (embedding and the dense
// conversion for cuBLAS: one kernel for every type).
__host__ __device__ __forceinline__ void dequant32_any(DType t, const std::uint8_t* row, std::int64_t s, std::int64_t k,
                                                       float* out) {
  switch (t) {
    case DType::F32:
      dequant32<DType::F32>(row, s, k, out);
      break;
    case DType::F16:
      dequant32<DType::F16>(row, s, k, out);
      break;
    case DType::BF16:
      dequant32<DType::BF16>(row, s, k, out);
      break;
    case DType::Q4_0:
      dequant32<DType::Q4_0>(row, s, k, out);
      break;
    case DType::Q4_1:
      dequant32<DType::Q4_1>(row, s, k, out);
      break;
    case DType::Q5_0:
      dequant32<DType::Q5_0>(row, s, k, out);
      break;
    case DType::Q5_1:
      dequant32<DType::Q5_1>(row, s, k, out);
      break;
    case DType::Q8_0:
      dequant32<DType::Q8_0>(row, s, k, out);
      break;
    case DType::Q2_K:
      dequant32<DType::Q2_K>(row, s, k, out);
      break;
    case DType::Q3_K:
      dequant32<DType::Q3_K>(row, s, k, out);
      break;
    case DType::Q4_K:
      dequant32<DType::Q4_K>(row, s, k, out);
      break;
    case DType::Q5_K:
      dequant32<DType::Q5_K>(row, s, k, out);
      break;
    case DType::Q6_K:
      dequant32<DType::Q6_K>(row, s, k, out);
      break;
    case DType::IQ4_NL:
      dequant32<DType::IQ4_NL>(row, s, k, out);
      break;
    case DType::IQ4_XS:
      dequant32<DType::IQ4_XS>(row, s, k, out);
      break;
    case DType::MXFP4:
      dequant32<DType::MXFP4>(row, s, k, out);
      break;
    case DType::NVFP4:
      dequant32<DType::NVFP4>(row, s, k, out);
      break;
    default:
      for (int e = 0; e < 32; ++e) out[e] = 0.0f;
  }
}

}  // namespace folio::cuda
