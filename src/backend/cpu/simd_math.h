// Vector math for the CPU kernels (AVX2 + FMA + F16C): exp, loads of cache
// rows of any KV type (f32, f16, bf16, int8, fp8 codes) as floats, and a
// fixed-order horizontal sum. Include only inside a region compiled for that
// target (see the kernel files). Every function is a fixed sequence of IEEE
// operations, so a value depends only on its inputs.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace folio::simd {

// Sum of the 8 lanes: halves added, then pairs.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// e^x, within about 2 ulp for x in [-87, 88]; below that 0, above it +inf
// (clamped), NaN stays NaN. Range reduction x = n ln2 + r (ln2 split in two
// so that n ln2 is exact), then a degree-6 polynomial for e^r on
// |r| <= ln2 / 2 and 2^n put in the exponent.
inline __m256 exp(__m256 x) {
  const __m256 kMax = _mm256_set1_ps(88.3762626647949f);
  const __m256 kMin = _mm256_set1_ps(-87.3365478515625f);
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 too_small = _mm256_cmp_ps(x, kMin, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, kMin), kMax);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // Taylor coefficients 1/k!, k = 6 .. 0, in Horner form.
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // 2^n: n in [-126, 128]; build it in two halves so that n = 128 (and the
  // smallest normals) stay representable.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 pow_a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 pow_b = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, pow_a), pow_b);
  result = _mm256_andnot_ps(too_small, result);
  return _mm256_blendv_ps(result, _mm256_set1_ps(__builtin_nanf("")), is_nan);
}

// 8 consecutive elements of a KV cache row (f32, f16 or bf16) as floats.
template <DType T>
inline __m256 load8(const void* base, std::int64_t index) {
  if constexpr (T == DType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + index);
  } else if constexpr (T == DType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(base) + index)));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(base) + index));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// 8 int8 codes as floats.
inline __m256 load8_i8(const std::uint8_t* codes) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

// 8 FP8 E4M3 codes as floats divided by 256, exactly. A code's exponent and
// mantissa bits moved to bits 13..7 of an IEEE half (sign to bit 15) make a
// half worth 2^-8 of the E4M3 value, subnormals included (both formats put
// the subnormal step at 2^-3 of the smallest normal); S.1111.111 (NaN) gets
// the half's NaN exponent. A shift and a conversion, no table gather.
inline __m256 load8_fp8_over_256(const std::uint8_t* codes) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  const __m128i magnitude = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7);
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
  const __m128i nan = _mm_and_si128(_mm_cmpeq_epi16(magnitude, _mm_set1_epi16(0x3f80)), _mm_set1_epi16(0x7c00));
  return _mm256_cvtph_ps(_mm_or_si128(_mm_or_si128(magnitude, sign), nan));
}

}  // namespace folio::simd
