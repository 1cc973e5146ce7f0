// The rotary table a config describes, computed on the host once per model:
// the inverse frequency of each rotated pair with the config's scaling folded
// in (linear, Llama 3, YaRN, LongRoPE's factors, GGUF's rope_freqs), and the
// factor YaRN and LongRoPE put on cos and sin. The backends' rope op applies
// it (backend.h, RopeTable); nothing else about scaling reaches a device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace folio {

// [rope.dim / 2] inverse frequencies. long_factors picks LongRoPE's long set
// (see rope_long_factors); other scalings ignore it.
std::vector<float> rope_inv_freq(const ModelConfig& config, bool long_factors = false);

// The magnitude on cos/sin: the config's attention_factor when it has one;
// YaRN's get_mscale(s, mscale) / get_mscale(s, mscale_all_dim) (DeepSeek
// style, both given) or get_mscale(s) = 0.1 ln s + 1; LongRoPE's
// sqrt(1 + ln s / ln original_context); 1 otherwise.
double rope_attention_factor(const RopeConfig& rope);

// Whether LongRoPE runs its long factors for an engine whose sequences reach
// max_model_len tokens: when that is past the trained context. (llama.cpp
// chooses by its context size the same way; transformers by each forward's
// length, which agrees for a sequence run whole.)
bool rope_long_factors(const RopeConfig& rope, std::int64_t max_model_len);

// Why a model's context ends where it does, for an error that refuses a
// longer --max-model-len: "trained length; no rope scaling in its config
// extends it", "32768 trained x yarn factor 4", ...
std::string context_limit_reason(const ModelConfig& config);

// One line for `folio inspect`: the scaling and what it does to the table
// ("yarn x4 over 32768 trained tokens, correction range beta 32 / 1, cos/sin
// x 1.1386"); "none" without one.
std::string describe_rope_scaling(const ModelConfig& config);

}  // namespace folio
