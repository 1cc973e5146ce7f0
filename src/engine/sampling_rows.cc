#include "engine/sampling_rows.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace folio {

void logit_adjustments(const SamplingParams& params, const TokenCounts& prompt_tokens,
                       const TokenCounts& output_tokens, std::span<const TokenId> extra,
                       std::vector<LogitAdjustment>& out) {
  out.clear();
  const bool repetition = params.repetition_penalty != 1.0f;
  const bool counts_output =
      repetition || params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f;
  for (const auto& [token, bias] : params.logit_bias) {
    LogitAdjustment a;
    a.token = token;
    a.has_bias = 1;
    a.bias = bias;
    out.push_back(a);
  }
  if (params.holds_back(output_tokens.num_tokens() + static_cast<std::int64_t>(extra.size()))) {
    for (TokenId token : params.held_back) {
      LogitAdjustment a;
      a.token = token;
      a.has_bias = 1;
      a.bias = -std::numeric_limits<float>::infinity();
      out.push_back(a);
    }
  }
  if (counts_output) {
    for (const TokenCounts::Entry& e : output_tokens.entries()) {
      LogitAdjustment a;
      a.token = e.token;
      a.output_count = e.count;
      out.push_back(a);
    }
    for (TokenId t : extra) {
      LogitAdjustment a;
      a.token = t;
      a.output_count = 1;
      out.push_back(a);
    }
  }
  if (repetition) {
    for (const TokenCounts::Entry& e : prompt_tokens.entries()) {
      LogitAdjustment a;
      a.token = e.token;
      a.in_prompt = 1;
      out.push_back(a);
    }
  }
  // One entry per token: merge what each source said of it.
  std::sort(out.begin(), out.end(), [](const LogitAdjustment& a, const LogitAdjustment& b) { return a.token < b.token; });
  std::size_t n = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (n > 0 && out[n - 1].token == out[i].token) {
      LogitAdjustment& m = out[n - 1];
      if (out[i].has_bias != 0) {  // logit_bias and a hold-back: the hold-back (-inf) wins
        m.bias = m.has_bias != 0 ? std::min(m.bias, out[i].bias) : out[i].bias;
        m.has_bias = 1;
      }
      m.output_count += out[i].output_count;
      m.in_prompt |= out[i].in_prompt;
    } else {
      out[n++] = out[i];
    }
  }
  out.resize(n);
}

std::size_t add_sampling_rows(SamplingRequest& request, std::int32_t first_logits_row, const SamplingParams& params,
                              const TokenCounts& prompt_tokens, const TokenCounts& output_tokens,
                              const SamplingRng& rng, std::span<const TokenId> draft,
                              std::vector<LogitAdjustment>& scratch) {
  SamplingRowParams row = Sampler::row_params(params);
  const std::size_t first = request.rows.size();
  for (std::size_t i = 0; i <= draft.size(); ++i) {
    SamplingRng start = rng;
    if (!row.is_greedy()) start.skip(i);  // every row before it drew once when it accepted
    row.rng_state = start.state();
    row.logits_row = first_logits_row + static_cast<std::int32_t>(i);
    row.draft_token = i < draft.size() ? draft[i] : -1;
    logit_adjustments(params, prompt_tokens, output_tokens, draft.first(i), scratch);
    request.add(row, scratch);
  }
  return first;
}

void constraint_masks(ConstraintMatcher& matcher, std::span<const TokenId> draft, std::vector<std::uint32_t>& out) {
  const auto words = static_cast<std::size_t>(matcher.mask_words());
  const std::size_t first = out.size();
  out.resize(first + words * (draft.size() + 1));
  auto row = [&](std::size_t i) { return std::span<std::uint32_t>(out.data() + first + i * words, words); };
  int accepted = 0;
  std::size_t i = 0;
  for (;; ++i) {
    matcher.fill_next_token_mask(row(i));
    if (i == draft.size() || !matcher.accept(draft[i])) break;
    ++accepted;
    // An end token completed it: the chain ends with that proposal or before.
    if (matcher.is_terminated()) break;
  }
  for (std::size_t j = i + 1; j <= draft.size(); ++j) std::copy(row(i).begin(), row(i).end(), row(j).begin());
  matcher.rollback(accepted);
}

SampledChain read_sampled_rows(const SamplingRequest& request, const StepSamples& samples, std::size_t first_row,
                               std::span<const TokenId> draft, const SamplingParams& params) {
  SampledChain chain;
  FOLIO_CHECK(first_row + draft.size() < samples.results.size());
  for (std::size_t i = 0; i <= draft.size(); ++i) {
    const SamplingRowParams& row = request.rows[first_row + i];
    const SampleResult& r = samples.results[first_row + i];
    SampledToken t;
    t.token = r.token;
    if (row.logprob_slot >= 0) {
      const LogprobResult& lp = samples.logprobs[static_cast<std::size_t>(row.logprob_slot)];
      t.logprob = lp.logprob;
      t.num_top = lp.num_top;
      std::copy(lp.top, lp.top + lp.num_top, t.top.begin());
    }
    chain.emitted.push_back(t);
    const bool last = i == draft.size();
    if (!params.is_greedy()) chain.num_draws += last || r.accepted != 0 ? 1 : 2;
    if (last || r.accepted == 0) break;
    ++chain.num_accepted;
  }
  return chain;
}

}  // namespace folio
