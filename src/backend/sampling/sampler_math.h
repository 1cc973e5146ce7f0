// sampler_math: the loops over a whole row of logits that every sampled token
// pays for. They compare floats through their bits (integer compares), so the
// compiler vectorises them without -ffast-math, and each result is defined
// exactly, so tests and speculative decoding can reproduce it bit for bit.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

namespace folio::sampler_math {

// Bits of -87.0f: below it exp(x) is under 2^-125, and the weight drops to 0.
inline constexpr std::uint32_t kExpMinBits = 0xC2AE0000u;
inline constexpr float kExpMin = -87.0f;

// a where mask is all ones, b where it is all zeros.
inline float pick(std::uint32_t mask, float a, float b) {
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & mask) |
                              (std::bit_cast<std::uint32_t>(b) & ~mask));
}
inline std::uint32_t mask_if(bool c) { return 0u - static_cast<std::uint32_t>(c); }

// True for finite x > 0 (not NaN, not +inf): the values that count as weight.
inline bool is_positive_finite(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  return b - 1u < 0x7F7FFFFFu;  // b in [1, 0x7F7FFFFF]
}

// exp(x) for x in [-87, 0], within 1.2 ulp of the true value; 0 for x below
// -87, for -inf and for NaN (x > 0 never occurs: x is logit - max). The
// method: 2^n x exp(r) with n = round(x / ln 2), r = x - n ln 2 in two parts
// (Cody and Waite: ln 2 = 0.693359375 - 2.12194440e-4, the first part short
// enough that n times it is exact), and exp(r) by its Taylor series to r^7
// (truncation below 1e-8 for |r| <= ln 2 / 2).
inline float softmax_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 x 2^23: adding it rounds to an integer
  const std::uint32_t xb = std::bit_cast<std::uint32_t>(x);
  // x in [-87, -0] has the sign bit and at most -87's magnitude; or x is +0.
  const std::uint32_t in_range = mask_if((xb >= 0x80000000u && xb <= kExpMinBits) || xb == 0u);
  const float xc = pick(in_range, x, kExpMin);
  const float t = xc * kLog2e + kRound;
  const float n = t - kRound;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n from its exponent field; n is in [-126, 0], read off t's low bits.
  const std::uint32_t two_n_bits =
      (std::bit_cast<std::uint32_t>(t) - std::bit_cast<std::uint32_t>(kRound) + 127u) << 23;
  return pick(in_range, p * std::bit_cast<float>(two_n_bits), 0.0f);
}

// The weight softmax gives `logit` at `temperature` relative to the top logit
// (whose own weight is exactly 1).
inline float softmax_weight(float logit, float max_logit, float temperature) {
  return softmax_exp((logit - max_logit) / temperature);
}

// A logit's bits as an int32 that orders like the logit, NaN below every
// other value (even -inf): integer compares of keys rank logits, and vectorise.
inline std::int32_t logit_key(float logit) {
  constexpr std::int32_t kNaNKey = -0x7FFFFFFF - 1;  // int32 min: no float's key
  const auto b = std::bit_cast<std::uint32_t>(logit);
  const auto s = static_cast<std::int32_t>(b);
  const std::int32_t key = s ^ ((s >> 31) & 0x7FFFFFFF);  // flip negatives' magnitude bits
  const auto valid = static_cast<std::int32_t>(mask_if((b & 0x7FFFFFFFu) <= 0x7F800000u));
  return (key & valid) | (kNaNKey & ~valid);
}

// The largest logit of the row, NaN ignored; -inf when the row has none.
float max_logit(std::span<const float> logits);

// weights[i] = softmax_weight(logits[i], max_logit, temperature), or 0 where
// that is below min_weight (min-p). weights.size() == logits.size().
void softmax_weights(std::span<const float> logits, float max_logit, float temperature,
                     float min_weight, std::span<float> weights);

// Sum of the positive finite values of a row in a fixed order: value i goes to
// lane i % 8 (each lane a double, in index order), and the lanes combine as
// ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)). LaneSum gives the same total from
// the nonzero entries alone, added in index order.
double lane_sum(std::span<const float> values);

class LaneSum {
 public:
  void add(std::int64_t index, float value) {
    if (is_positive_finite(value)) lanes_[index & 7] += value;
  }
  double total() const {
    return ((lanes_[0] + lanes_[1]) + (lanes_[2] + lanes_[3])) +
           ((lanes_[4] + lanes_[5]) + (lanes_[6] + lanes_[7]));
  }

 private:
  double lanes_[8] = {0, 0, 0, 0, 0, 0, 0, 0};
};

// lane_sum of softmax_exp(logits[i] - max_logit): the softmax denominator at
// temperature 1, for log_softmax.
double exp_sum(std::span<const float> logits, float max_logit);

// How many logits are >= threshold (NaN never is), and the lane sum of their
// weights: a probe for how deep below the top logit top-k and top-p reach.
struct AtOrAbove {
  std::int64_t count = 0;
  double mass = 0.0;
};
AtOrAbove at_or_above(std::span<const float> logits, std::span<const float> weights,
                      float threshold);

// values[i] /= divisor, in float.
void divide(std::span<float> values, float divisor);

}  // namespace folio::sampler_math
