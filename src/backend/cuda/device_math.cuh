// Device-side number handling shared by every CUDA kernel: the conversions
// of tensor/half.h and tensor/fp8.h bit for bit (so that what a kernel stores
// or decodes is what the reference would), activation loads and stores, and
// warp reductions whose order is fixed (every lane ends with the same bits).
// Arithmetic that must match the reference is written with the _rn
// intrinsics, which the compiler never fuses into multiply-adds.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/kernel_args.h"

namespace folio::cuda {

__device__ __forceinline__ float f16_bits_to_f32(std::uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits_to_f32(std::uint16_t h) {
  return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
}

// tensor/half.h's f32_to_f16: round to nearest even; NaN keeps its sign and
// top payload bits (payload 1 when they are zero).
__device__ __forceinline__ std::uint16_t f32_to_f16_bits(float value) {
  const std::uint32_t bits = __float_as_uint(value);
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
__device__ __forceinline__ std::uint16_t f32_to_bf16_bits(float value) {
  const std::uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  const std::uint32_t lowest_kept = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7fffu + lowest_kept) >> 16);
}

// tensor/fp8.h's E4M3 decode: exact.
__device__ __forceinline__ float fp8_e4m3_to_f32(std::uint8_t b) {
  const std::uint32_t sign = (b & 0x80u) ? 0x80000000u : 0u;
  const int exponent = (b >> 3) & 0x0f;
  const int mantissa = b & 0x07;
  if (exponent == 0x0f && mantissa == 0x07) return __uint_as_float(sign | 0x7fc00000u);
  if (exponent == 0) return __uint_as_float(sign | __float_as_uint(static_cast<float>(mantissa) * 0x1p-9f));
  return __uint_as_float(sign | (static_cast<std::uint32_t>(exponent - 7 + 127) << 23) |
                         (static_cast<std::uint32_t>(mantissa) << 20));
}

// tensor/fp8.h's f32_to_fp8_e4m3: nearest even, saturating at 448; NaN keeps its sign.
__device__ __forceinline__ std::uint8_t f32_to_fp8_e4m3(float x) {
  const std::uint8_t sign = signbit(x) ? 0x80 : 0x00;
  if (isnan(x)) return sign | 0x7f;
  const float a = fabsf(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0x1p-6f) return static_cast<std::uint8_t>(sign | static_cast<int>(rintf(__fmul_rn(a, 512.0f))));
  int e = 0;
  const float fraction = frexpf(a, &e);
  --e;
  int m = static_cast<int>(rintf(__fmul_rn(__fsub_rn(__fmul_rn(2.0f, fraction), 1.0f), 8.0f)));
  if (m == 8) {
    m = 0;
    ++e;
  }
  const int code = ((e + 7) << 3) | m;
  return static_cast<std::uint8_t>(sign | (code >= 0x7f ? 0x7e : code));
}

// Activations: f32 or bf16, chosen per tensor at run time (ActKind).
__device__ __forceinline__ float load_act(const void* p, std::int64_t i, int kind) {
  if (kind == kActBf16) return bf16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
__device__ __forceinline__ void store_act(void* p, std::int64_t i, int kind, float v) {
  if (kind == kActBf16) {
    static_cast<std::uint16_t*>(p)[i] = f32_to_bf16_bits(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

// Sum over the 32 lanes by butterfly: each step adds a and b on one lane and
// b and a on its partner, equal bits, so every lane ends with the same total.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The first error a kernel finds (DeviceStatus in pinned, mapped host
// memory); later ones are dropped. The host reads it at the next sync.
__device__ __forceinline__ void report(DeviceStatus* status, int code, long long a, long long b, long long c) {
  if (atomicCAS(&status->code, 0, -1) == 0) {
    status->a = a;
    status->b = b;
    status->c = c;
    __threadfence_system();
    atomicExch(&status->code, code);
  }
}

}  // namespace folio::cuda
