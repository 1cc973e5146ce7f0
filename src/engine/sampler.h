// Sampler: the host reference of the sampling op. One row of logits -> one
// token for a request's SamplingParams, with its penalties counted on the host
// (TokenCounts), then RowSampler's filters and draw (backend/sampling/
// row_sampler.h says exactly what they do). The engine samples on the device
// (Backend::sample); tests and the host path (EngineConfig::host_sampling)
// use this, and both give the same bits. Pure logic; it holds only scratch
// buffers reused across calls, so keep one per thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/sampling/row_sampler.h"
#include "backend/sampling/sampling_batch.h"
#include "backend/sampling/sampling_rng.h"
#include "engine/sampling_params.h"
#include "engine/token_counts.h"

namespace folio {

struct SampledToken {
  TokenId token = -1;
  // Logprobs come from the model's unprocessed distribution (log_softmax of
  // the raw logits, as vLLM returns by default); set when params.logprobs is.
  std::optional<float> logprob;                  // of `token`
  std::array<TokenLogprob, kMaxLogprobs> top{};  // [num_top], most likely first, ties by lower id
  int num_top = 0;

  std::span<const TokenLogprob> top_logprobs() const {
    return {top.data(), static_cast<std::size_t>(num_top)};
  }
};

// Besides RowSampler's rules: tokens counted in prompt_tokens or
// output_tokens, and logit_bias keys, must be < vocab_size.
class Sampler {
 public:
  // Chooses the next token of one sequence. prompt_tokens feeds only the
  // repetition penalty; output_tokens counts the tokens generated so far.
  // A token mask (structured outputs; empty: none) applies first, as in
  // RowSampler: forbidden tokens at -inf, logprobs from the masked logits.
  SampledToken sample(std::span<const float> logits, const SamplingParams& params,
                      const TokenCounts& prompt_tokens, const TokenCounts& output_tokens,
                      SamplingRng& rng, std::span<const std::uint32_t> mask = {});

  // The distribution sample() draws from, normalised, written to probs
  // ([vocab_size], zero outside the kept tokens; one-hot for greedy).
  // sample_from(probs, rng) then chooses what sample() would with that rng:
  // speculative decoding verifies drafts against these rows.
  void processed_probs(std::span<const float> logits, const SamplingParams& params,
                       const TokenCounts& prompt_tokens, const TokenCounts& output_tokens,
                       std::span<float> probs, std::span<const std::uint32_t> mask = {});

  // Logits under a token mask (RowSampler::masked): `logits` when it is empty.
  std::span<const float> masked(std::span<const float> logits, std::span<const std::uint32_t> mask) {
    return row_.masked(logits, mask);
  }

  // Draws one token from non-negative weights (they need not sum to 1; NaN
  // and negative weights count as 0), walking ids in order with one uniform.
  static TokenId sample_from(std::span<const float> probs, SamplingRng& rng);

  // Sets out.logprob for `token` and out.top to the num_top most likely tokens
  // (at most kMaxLogprobs), all from log_softmax of the raw logits.
  static void fill_logprobs(std::span<const float> logits, TokenId token, int num_top,
                            SampledToken& out);

  // The filter part of a row's record for these params (temperature, top-k,
  // top-p, min-p, penalties and logprobs; no RNG state, draft or adjustments).
  static SamplingRowParams row_params(const SamplingParams& params);

 private:
  // Logits after logit_bias, min_tokens' hold-back (-inf) and penalties:
  // `logits` itself when none applies, else a copy in work_.
  std::span<const float> biased_and_penalised(std::span<const float> logits,
                                              const SamplingParams& params,
                                              const TokenCounts& prompt_tokens,
                                              const TokenCounts& output_tokens);

  RowSampler row_;
  std::vector<float> work_;  // [vocab_size] biased and penalised logits
};

}  // namespace folio
