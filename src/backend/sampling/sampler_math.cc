#include "backend/sampling/sampler_math.h"

#include <algorithm>
#include <limits>

namespace folio::sampler_math {

namespace {

constexpr std::int32_t kNaNKey = std::numeric_limits<std::int32_t>::min();

// The float whose logit_key is `key` (the key map is its own inverse).
float from_key(std::int32_t key) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(key ^ ((key >> 31) & 0x7FFFFFFF)));
}

}  // namespace

float max_logit(std::span<const float> logits) {
  std::int32_t lanes[8] = {kNaNKey, kNaNKey, kNaNKey, kNaNKey,
                           kNaNKey, kNaNKey, kNaNKey, kNaNKey};
  const std::size_t n = logits.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) lanes[j] = std::max(lanes[j], logit_key(logits[i + j]));
  }
  for (std::size_t j = 0; i + j < n; ++j) lanes[j] = std::max(lanes[j], logit_key(logits[i + j]));
  std::int32_t best = kNaNKey;
  for (std::int32_t lane : lanes) best = std::max(best, lane);
  if (best == kNaNKey) return -std::numeric_limits<float>::infinity();
  return from_key(best);
}

void softmax_weights(std::span<const float> logits, float max_logit, float temperature,
                     float min_weight, std::span<float> weights) {
  // Weights are >= 0, where float order is the order of the bits (-0 and
  // NaN bounds would not be: they keep every weight, as a float compare would).
  const std::uint32_t min_bits = min_weight > 0.0f ? std::bit_cast<std::uint32_t>(min_weight) : 0u;
  const std::size_t n = logits.size();
  const float* in = logits.data();
  float* out = weights.data();
  for (std::size_t i = 0; i < n; ++i) {
    const float w = softmax_weight(in[i], max_logit, temperature);
    out[i] = pick(mask_if(std::bit_cast<std::uint32_t>(w) >= min_bits), w, 0.0f);
  }
}

double lane_sum(std::span<const float> values) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const std::size_t n = values.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) {
      // Adding +0.0 leaves a lane as it is, so LaneSum may skip zeros and agree.
      const float v = values[i + j];
      lanes[j] += static_cast<double>(pick(mask_if(is_positive_finite(v)), v, 0.0f));
    }
  }
  for (std::size_t j = 0; i + j < n; ++j) {
    const float v = values[i + j];
    if (is_positive_finite(v)) lanes[j] += static_cast<double>(v);
  }
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

double exp_sum(std::span<const float> logits, float max_logit) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const std::size_t n = logits.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) {
      lanes[j] += static_cast<double>(softmax_exp(logits[i + j] - max_logit));
    }
  }
  for (std::size_t j = 0; i + j < n; ++j) {
    lanes[j] += static_cast<double>(softmax_exp(logits[i + j] - max_logit));
  }
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

AtOrAbove at_or_above(std::span<const float> logits, std::span<const float> weights,
                      float threshold) {
  // Two loops, because the vectoriser takes each alone but not both in one.
  const std::int32_t threshold_key = logit_key(threshold);
  const std::size_t n = logits.size();
  const float* l = logits.data();
  const float* w = weights.data();
  AtOrAbove out;
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) count += logit_key(l[i]) >= threshold_key ? 1 : 0;
  out.count = static_cast<std::int64_t>(count);
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (std::size_t j = 0; j < 8; ++j) {
      const float v = w[i + j];
      const std::uint32_t in =
          mask_if(logit_key(l[i + j]) >= threshold_key) & mask_if(is_positive_finite(v));
      lanes[j] += static_cast<double>(pick(in, v, 0.0f));
    }
  }
  for (std::size_t j = 0; i + j < n; ++j) {
    const float v = w[i + j];
    if (logit_key(l[i + j]) >= threshold_key && is_positive_finite(v)) lanes[j] += v;
  }
  out.mass = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
             ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  return out;
}

void divide(std::span<float> values, float divisor) {
  for (float& v : values) v /= divisor;
}

}  // namespace folio::sampler_math
