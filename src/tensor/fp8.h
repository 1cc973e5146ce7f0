// FP8 E4M3 (the "FN" variant of the OCP 8-bit float spec: 1 sign, 4 exponent
// bits with bias 7, 3 mantissa bits, no infinities, S.1111.111 is NaN, the
// largest finite magnitude 448) converted to and from float exactly.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

namespace folio {

inline constexpr float kFp8E4M3Max = 448.0f;

// E4M3 -> float. Exact: every E4M3 value is a float.
constexpr float fp8_e4m3_to_f32(std::uint8_t b) {
  const bool negative = (b & 0x80u) != 0;
  const int exponent = (b >> 3) & 0x0f;
  const int mantissa = b & 0x07;
  float magnitude = 0.0f;
  if (exponent == 0x0f && mantissa == 0x07) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0x1p-9f;  // subnormal: m/8 * 2^-6
  } else {
    // (1 + m/8) * 2^(e - 7), built by halving or doubling exactly.
    magnitude = 1.0f + static_cast<float>(mantissa) * 0.125f;
    for (int e = exponent - 7; e > 0; --e) magnitude *= 2.0f;
    for (int e = exponent - 7; e < 0; ++e) magnitude *= 0.5f;
  }
  return negative ? -magnitude : magnitude;
}

// float -> E4M3, rounding to nearest even and saturating: a magnitude at or
// beyond 448 (infinity included) becomes +-448. NaN becomes the NaN code of
// its sign.
inline std::uint8_t f32_to_fp8_e4m3(float x) {
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::fabs(x);
  if (a >= kFp8E4M3Max) return sign | 0x7e;
  if (a < 0x1p-6f) {
    // Subnormal range: steps of 2^-9. A count of 8 is the smallest normal,
    // whose code is also 8 (exponent 1, mantissa 0).
    return static_cast<std::uint8_t>(sign | static_cast<int>(std::nearbyint(a * 512.0f)));
  }
  int e = 0;
  const float fraction = std::frexp(a, &e);  // a = fraction * 2^e, fraction in [0.5, 1)
  --e;                                        // a = (2 * fraction) * 2^e, 2 * fraction in [1, 2)
  int m = static_cast<int>(std::nearbyint((2.0f * fraction - 1.0f) * 8.0f));  // exact operands; rounds to even
  if (m == 8) {
    m = 0;
    ++e;
  }
  const int code = ((e + 7) << 3) | m;
  return static_cast<std::uint8_t>(sign | (code >= 0x7f ? 0x7e : code));
}

// All 256 codes decoded: a lookup table for scalar loops, exactly
// fp8_e4m3_to_f32.
inline const std::array<float, 256>& fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<std::size_t>(i)] = fp8_e4m3_to_f32(static_cast<std::uint8_t>(i));
    return t;
  }();
  return table;
}

}  // namespace folio
