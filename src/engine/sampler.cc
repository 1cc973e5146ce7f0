#include "engine/sampler.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace folio {
namespace {

void check_token(TokenId token, std::size_t vocab_size, const char* what) {
  if (token < 0 || static_cast<std::size_t>(token) >= vocab_size) {
    fail("{} names token {}, outside this row of {} logits; the request's tokens must come from "
         "the model's own vocabulary",
         what, token, vocab_size);
  }
}

}  // namespace

SamplingRowParams Sampler::row_params(const SamplingParams& params) {
  SamplingRowParams row;
  row.temperature = params.temperature;
  row.top_k = params.top_k;
  row.top_p = params.top_p;
  row.min_p = params.min_p;
  row.repetition_penalty = params.repetition_penalty;
  row.presence_penalty = params.presence_penalty;
  row.frequency_penalty = params.frequency_penalty;
  row.num_logprobs = params.logprobs ? *params.logprobs : -1;
  return row;
}

std::span<const float> Sampler::biased_and_penalised(std::span<const float> logits,
                                                     const SamplingParams& params,
                                                     const TokenCounts& prompt_tokens,
                                                     const TokenCounts& output_tokens) {
  const bool repetition = params.repetition_penalty != 1.0f;
  const bool openai_penalties =
      output_tokens.num_distinct() > 0 &&
      (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f);
  const bool held_back = params.holds_back(output_tokens.num_tokens());
  if (params.logit_bias.empty() && !repetition && !openai_penalties && !held_back) return logits;

  work_.assign(logits.begin(), logits.end());
  for (const auto& [token, bias] : params.logit_bias) {
    check_token(token, work_.size(), "logit_bias");
    work_[token] += bias;
  }
  if (held_back) {
    for (TokenId token : params.held_back) {
      check_token(token, work_.size(), "min_tokens");
      work_[token] = -std::numeric_limits<float>::infinity();
    }
  }
  if (repetition) {
    const float penalty = params.repetition_penalty;
    auto apply = [&](TokenId token) {
      float& l = work_[token];
      l = l > 0.0f ? l / penalty : l * penalty;
    };
    for (const TokenCounts::Entry& e : output_tokens.entries()) {
      check_token(e.token, work_.size(), "the output");
      apply(e.token);
    }
    for (const TokenCounts::Entry& e : prompt_tokens.entries()) {
      check_token(e.token, work_.size(), "the prompt");
      if (!output_tokens.contains(e.token)) apply(e.token);  // once per token of prompt or output
    }
  }
  if (openai_penalties) {
    for (const TokenCounts::Entry& e : output_tokens.entries()) {
      check_token(e.token, work_.size(), "the output");
      float& l = work_[e.token];
      l -= params.frequency_penalty * static_cast<float>(e.count);
      l -= params.presence_penalty;
    }
  }
  return work_;
}

SampledToken Sampler::sample(std::span<const float> raw_logits, const SamplingParams& params,
                             const TokenCounts& prompt_tokens, const TokenCounts& output_tokens,
                             SamplingRng& rng, std::span<const std::uint32_t> mask) {
  if (raw_logits.empty()) fail("cannot sample from an empty row of logits: the model has no tokens");
  const std::span<const float> logits = row_.masked(raw_logits, mask);
  SampledToken out;
  const std::span<const float> processed = biased_and_penalised(logits, params, prompt_tokens, output_tokens);
  out.token = row_.choose(processed, row_params(params), rng);
  if (params.logprobs) fill_logprobs(logits, out.token, *params.logprobs, out);
  return out;
}

void Sampler::processed_probs(std::span<const float> raw_logits, const SamplingParams& params,
                              const TokenCounts& prompt_tokens, const TokenCounts& output_tokens,
                              std::span<float> probs, std::span<const std::uint32_t> mask) {
  if (raw_logits.empty()) fail("cannot sample from an empty row of logits: the model has no tokens");
  const std::span<const float> logits = row_.masked(raw_logits, mask);
  row_.processed_probs(biased_and_penalised(logits, params, prompt_tokens, output_tokens), row_params(params), probs);
}

TokenId Sampler::sample_from(std::span<const float> probs, SamplingRng& rng) {
  return RowSampler::sample_from(probs, rng);
}

void Sampler::fill_logprobs(std::span<const float> logits, TokenId token, int num_top, SampledToken& out) {
  LogprobResult r;
  RowSampler::fill_logprobs(logits, token, num_top, r);
  out.logprob = r.logprob;
  out.num_top = r.num_top;
  std::copy(r.top, r.top + r.num_top, out.top.begin());
}

}  // namespace folio
