// Half-precision numbers (IEEE binary16 and bfloat16) as raw 16-bit patterns,
// converted to and from float exactly as numpy and the gguf package do, so a
// conversion here gives the same bits as the files those tools write.
#pragma once

#include <bit>
#include <cstdint>

namespace folio {

// IEEE binary16 -> float. Exact; a NaN keeps its sign and payload (shifted up,
// still signalling if it was), as numpy's astype(np.float32) does.
constexpr float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal or zero: mantissa * 2^-24, which float holds exactly.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

// float -> IEEE binary16, rounding to nearest even; too large becomes +-inf,
// too small becomes a subnormal or +-0. A NaN keeps its sign and the top ten
// bits of its payload, and becomes payload 1 if those are all zero, so that it
// stays a NaN: numpy's rule (it does not quieten a signalling NaN).
constexpr std::uint16_t f32_to_f16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t exponent = (bits >> 23) & 0xffu;
  const std::uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) {
    if (mantissa == 0) return sign | 0x7c00u;
    const std::uint32_t payload = mantissa >> 13;
    return static_cast<std::uint16_t>(sign | 0x7c00u | (payload != 0 ? payload : 1u));
  }
  const int half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 0x1f) return sign | 0x7c00u;
  if (half_exponent >= 1) {
    // Normal: drop 13 bits. A carry out of the mantissa correctly bumps the
    // exponent, up to and including infinity.
    std::uint32_t h = (static_cast<std::uint32_t>(half_exponent) << 10) | (mantissa >> 13);
    const std::uint32_t dropped = mantissa & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  // Subnormal result: the value is significand * 2^(e - 150) and the result
  // counts units of 2^-24, so it is significand >> (126 - e), rounded.
  const std::uint32_t significand = exponent == 0 ? mantissa : (mantissa | 0x800000u);
  const int shift = 126 - static_cast<int>(exponent == 0 ? 1 : exponent);
  if (shift > 24) return sign;  // below half the smallest subnormal: +-0
  std::uint32_t h = significand >> shift;
  const std::uint32_t dropped = significand & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (dropped > halfway || (dropped == halfway && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

// bfloat16 -> float: the 16 bits are the top half of the float. Exact.
constexpr float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// float -> bfloat16, rounding to nearest even (a carry may reach infinity). A
// NaN keeps its sign and top payload bits and is made quiet, as gguf does.
constexpr std::uint16_t f32_to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  const std::uint32_t lowest_kept = (bits >> 16) & 1u;
  return static_cast<std::uint16_t>((bits + 0x7fffu + lowest_kept) >> 16);
}

}  // namespace folio
