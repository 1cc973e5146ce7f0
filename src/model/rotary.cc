#include "model/rotary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace folio {
namespace {

// Llama 3's rescaling of a rotary frequency (HF rope_type "llama3"; GGUF files
// carry the resulting factors as rope_freqs.weight): long wavelengths are
// slowed by the factor, short ones kept, those between blended smoothly.
double llama3_frequency(const RopeConfig& rope, double f) {
  const double original = static_cast<double>(rope.original_context);
  const double wavelength = 2.0 * M_PI / f;
  if (wavelength < original / rope.high_freq_factor) return f;
  if (wavelength > original / rope.low_freq_factor) return f / rope.factor;
  const double smooth =
      (original / wavelength - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
  return (1.0 - smooth) * f / rope.factor + smooth * f;
}

// YaRN's magnitude term: 1 for s <= 1, else 0.1 m ln s + 1.
double yarn_mscale(double s, double m) { return s <= 1.0 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

// The pair index at which a wavelength makes `rotations` turns over the
// trained context: pairs below it turn faster (kept), above it slower
// (interpolated).
double yarn_correction_pair(double rotations, int dim, double base, double original) {
  return dim * std::log(original / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

// YaRN's frequency of pair i: the original frequency f blended with f /
// factor, all original below the correction range, all interpolated above it,
// linearly in between.
struct YarnRamp {
  double low = 0, high = 0;
  YarnRamp(const RopeConfig& rope) {
    const double original = static_cast<double>(rope.original_context);
    low = yarn_correction_pair(rope.beta_fast, rope.dim, rope.base, original);
    high = yarn_correction_pair(rope.beta_slow, rope.dim, rope.base, original);
    if (rope.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(rope.dim - 1));
    if (low == high) high += 0.001;  // no division by zero
  }
  double frequency(const RopeConfig& rope, int i, double f) const {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double original_share = (1.0 - ramp) * rope.ext_factor;
    return f / rope.factor * (1.0 - original_share) + f * original_share;
  }
};

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& c, bool long_factors) {
  const int dim = c.rope.dim;
  const std::vector<float>& factors = c.rope.freq_factors;
  if (!factors.empty() && static_cast<int>(factors.size()) != dim / 2)
    fail("model {}: rope_freqs holds {} factors, the rotary table {} pairs", c.name, factors.size(), dim / 2);
  const bool longrope = c.rope.scaling == RopeScaling::kLongRope;
  const std::vector<float>& pair_factors = long_factors ? c.rope.long_factors : c.rope.short_factors;
  if (longrope && static_cast<int>(pair_factors.size()) != dim / 2)
    fail("model {}: longrope has {} {} factors, the rotary table {} pairs", c.name, pair_factors.size(),
         long_factors ? "long" : "short", dim / 2);
  const YarnRamp ramp(c.rope);
  std::vector<float> inv_freq(static_cast<std::size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) {
    double f = 1.0 / std::pow(static_cast<double>(c.rope.base), 2.0 * i / dim);
    if (c.rope.scaling == RopeScaling::kLinear) f /= c.rope.factor;
    if (c.rope.scaling == RopeScaling::kLlama3 && factors.empty()) f = llama3_frequency(c.rope, f);
    if (c.rope.scaling == RopeScaling::kYarn) f = ramp.frequency(c.rope, i, f);
    if (longrope) f /= pair_factors[static_cast<std::size_t>(i)];
    if (!factors.empty()) f /= factors[static_cast<std::size_t>(i)];
    inv_freq[static_cast<std::size_t>(i)] = static_cast<float>(f);
  }
  return inv_freq;
}

double rope_attention_factor(const RopeConfig& rope) {
  if (rope.attention_factor > 0) return rope.attention_factor;
  if (rope.scaling == RopeScaling::kYarn) {
    if (rope.mscale > 0 && rope.mscale_all_dim > 0)
      return yarn_mscale(rope.factor, rope.mscale) / yarn_mscale(rope.factor, rope.mscale_all_dim);
    return yarn_mscale(rope.factor, 1.0);
  }
  if (rope.scaling == RopeScaling::kLongRope && rope.factor > 1.0f)
    return std::sqrt(1.0 + std::log(static_cast<double>(rope.factor)) /
                               std::log(static_cast<double>(rope.original_context)));
  return 1.0;
}

bool rope_long_factors(const RopeConfig& rope, std::int64_t max_model_len) {
  return rope.scaling == RopeScaling::kLongRope && max_model_len > rope.original_context;
}

std::string context_limit_reason(const ModelConfig& c) {
  const RopeConfig& r = c.rope;
  if (r.scaling == RopeScaling::kYarn && c.context_length > r.original_context)
    return fmt::format("{} trained x {} rope scaling factor {:g}", r.original_context, rope_scaling_name(r.scaling),
                       r.factor);
  if (r.scaling == RopeScaling::kDynamic)
    return "dynamic NTK rope scaling changes the rotary base with each sequence's length, which a paged cache "
           "cannot hold; folio runs it within the trained context only";
  if (r.scaling == RopeScaling::kNone)
    return "its trained length; its config has no rope scaling that extends it";
  return fmt::format("the context its {} rope scaling was made for", rope_scaling_name(r.scaling));
}

std::string describe_rope_scaling(const ModelConfig& c) {
  const RopeConfig& r = c.rope;
  std::string out;
  switch (r.scaling) {
    case RopeScaling::kNone: out = "none"; break;
    case RopeScaling::kLinear: out = fmt::format("linear: every frequency / {:g}", r.factor); break;
    case RopeScaling::kLlama3:
      out = fmt::format("llama3 x{:g} over {} trained tokens, low/high frequency factors {:g} / {:g}", r.factor,
                        r.original_context, r.low_freq_factor, r.high_freq_factor);
      break;
    case RopeScaling::kYarn:
      out = fmt::format("yarn x{:g} over {} trained tokens, correction range beta {:g} / {:g}{}", r.factor,
                        r.original_context, r.beta_fast, r.beta_slow, r.truncate ? "" : " (not truncated)");
      break;
    case RopeScaling::kLongRope:
      out = fmt::format("longrope: short factors up to {} tokens, long factors past them", r.original_context);
      break;
    case RopeScaling::kDynamic:
      out = fmt::format("dynamic NTK x{:g}: the plain table within the {} trained tokens", r.factor,
                        r.original_context);
      break;
  }
  if (const double f = rope_attention_factor(r); f != 1.0) out += fmt::format(", cos/sin x {:.4f}", f);
  if (!r.freq_factors.empty()) out += ", per-pair frequency factors";
  return out;
}

}  // namespace folio
