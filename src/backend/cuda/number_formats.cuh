// Number handling shared by the CUDA kernels and their host-side tests: the
// conversions of tensor/half.h and tensor/fp8.h bit for bit, the KV cache's
// scale rule of tensor/kv_dtype.cc, and float operations each rounded on its
// own. On the device these are the _rn intrinsics, which the compiler never
// fuses into multiply-adds; on the host plain operators (x86-64 without
// -mfma has no fused form to contract into), so tests/backend can check the
// kernels' arithmetic against the reference's without a GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include <cstdint>
#include <cstring>

// `#pragma unroll` for code that also compiles for the host, whose compiler
// does not know the pragma.
#if defined(__CUDA_ARCH__)
#define FOLIO_UNROLL _Pragma("unroll")
#else
#define FOLIO_UNROLL
#endif

namespace folio::cuda {

__host__ __device__ __forceinline__ float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ __forceinline__ float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ __forceinline__ float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
__host__ __device__ __forceinline__ float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
__host__ __device__ __forceinline__ std::uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}
__host__ __device__ __forceinline__ float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}
__host__ __device__ __forceinline__ bool is_nan(float x) { return x != x; }

__host__ __device__ __forceinline__ float f16_bits_to_f32(std::uint16_t h) { return __half2float(__ushort_as_half(h)); }
__host__ __device__ __forceinline__ float bf16_bits_to_f32(std::uint16_t h) {
  return float_of(static_cast<std::uint32_t>(h) << 16);
}

// tensor/half.h's f32_to_f16: round to nearest even; NaN keeps its sign and
// top payload bits (payload 1 when they are zero).
__host__ __device__ __forceinline__ std::uint16_t f32_to_f16_bits(float value) {
  const std::uint32_t bits = bits_of(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t exponent = (bits >> 23) & 0xffu;
  const std::uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) {
    if (mantissa == 0) return sign | 0x7c00u;
    const std::uint32_t payload = mantissa >> 13;
    return static_cast<std::uint16_t>(sign | 0x7c00u | (payload != 0 ? payload : 1u));
  }
  // Finite values: the hardware conversion rounds to nearest even, as half.h does.
  return __half_as_ushort(__float2half_rn(value));
}

// tensor/half.h's f32_to_bf16: round to nearest even; NaN made quiet.
__host__ __device__ __forceinline__ std::uint16_t f32_to_bf16_bits(float value) {
  const std::uint32_t bits = bits_of(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  const std::uint32_t lowest_kept = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7fffu + lowest_kept) >> 16);
}

// tensor/fp8.h's E4M3 decode: exact.
__host__ __device__ __forceinline__ float fp8_e4m3_to_f32(std::uint8_t b) {
  const std::uint32_t sign = (b & 0x80u) ? 0x80000000u : 0u;
  const int exponent = (b >> 3) & 0x0f;
  const int mantissa = b & 0x07;
  if (exponent == 0x0f && mantissa == 0x07) return float_of(sign | 0x7fc00000u);
  if (exponent == 0) return float_of(sign | bits_of(static_cast<float>(mantissa) * 0x1p-9f));
  return float_of(sign | (static_cast<std::uint32_t>(exponent - 7 + 127) << 23) |
                  (static_cast<std::uint32_t>(mantissa) << 20));
}

// tensor/fp8.h's f32_to_fp8_e4m3: nearest even, saturating at 448; NaN keeps its sign.
__host__ __device__ __forceinline__ std::uint8_t f32_to_fp8_e4m3(float x) {
  const std::uint8_t sign = (bits_of(x) >> 31) != 0 ? 0x80 : 0x00;
  if (is_nan(x)) return sign | 0x7f;
  const float a = fabsf(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0x1p-6f) return static_cast<std::uint8_t>(sign | static_cast<int>(rintf(mul_rn(a, 512.0f))));
  int e = 0;
  const float fraction = frexpf(a, &e);
  --e;
  int m = static_cast<int>(rintf(mul_rn(sub_rn(mul_rn(2.0f, fraction), 1.0f), 8.0f)));
  if (m == 8) {
    m = 0;
    ++e;
  }
  const int code = ((e + 7) << 3) | m;
  return static_cast<std::uint8_t>(sign | (code >= 0x7f ? 0x7e : code));
}

// kv_dtype.cc's scale_for: the f16 scale that maps amax to `top`, and the
// inverse of the rounded scale (0 for a zero scale).
struct KvScale {
  std::uint16_t bits;
  float inverse;
};
__host__ __device__ __forceinline__ KvScale kv_scale_for(float amax, float top) {
  const std::uint16_t bits = f32_to_f16_bits(fminf(div_rn(amax, top), 65504.0f));
  const float d = f16_bits_to_f32(bits);
  return {bits, d == 0.0f ? 0.0f : div_rn(1.0f, d)};
}

// kv_dtype.cc's to_code for q8_0: nearest even, clamped to [-127, 127]; NaN is 0.
__host__ __device__ __forceinline__ std::int8_t to_q8(float v) {
  if (is_nan(v)) return 0;
  return static_cast<std::int8_t>(static_cast<int>(fminf(fmaxf(rintf(v), -127.0f), 127.0f)));
}

}  // namespace folio::cuda
