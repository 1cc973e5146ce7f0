// The sampling records of one sequence's step (what the device samples
// from), and the tokens read back from their results: a sequence that does
// not speculate gets one row; one that verifies n proposals gets n + 1, row
// i with proposals 0 .. i - 1 counted in its penalties and its RNG moved i
// draws on, and the host walks the chain (accepted proposals, then the first
// replacement or the last row's token). Together they give exactly what the
// host Sampler and verify_draft give. Pure logic.
#pragma once

#include <span>
#include <vector>

#include "engine/constraint/constraint_matcher.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/token_counts.h"

namespace folio {

// The bias, min_tokens' hold-back (a bias of -inf) and penalties of a
// sequence as the sampling op reads them: one entry per token touched, with
// `extra` counted as output tokens too.
void logit_adjustments(const SamplingParams& params, const TokenCounts& prompt_tokens,
                       const TokenCounts& output_tokens, std::span<const TokenId> extra,
                       std::vector<LogitAdjustment>& out);

// Appends the rows of one sequence reading logits rows first_logits_row ..
// first_logits_row + draft.size(). Returns the index of its first row.
std::size_t add_sampling_rows(SamplingRequest& request, std::int32_t first_logits_row, const SamplingParams& params,
                              const TokenCounts& prompt_tokens, const TokenCounts& output_tokens,
                              const SamplingRng& rng, std::span<const TokenId> draft,
                              std::vector<LogitAdjustment>& scratch);

// The token masks of a constrained sequence's rows, draft.size() + 1 of
// them appended to `out` (mask_words words each): row i's is the
// constraint's state after proposals 0 .. i - 1. From a proposal the
// constraint refuses (or after one that completes it) on, the rows repeat
// the last mask (the chain stops there: that mask rejects the proposal, or
// the completion ends). The matcher ends where it began.
void constraint_masks(ConstraintMatcher& matcher, std::span<const TokenId> draft, std::vector<std::uint32_t>& out);

struct SampledChain {
  std::vector<SampledToken> emitted;  // accepted proposals, then one token of the target's
  int num_accepted = 0;
  std::uint64_t num_draws = 0;        // uniforms the rows drew, which the sequence's RNG skips
};

// The tokens of rows [first_row, first_row + draft.size() + 1) of a step's
// samples, for a sequence sampled with `params`.
SampledChain read_sampled_rows(const SamplingRequest& request, const StepSamples& samples, std::size_t first_row,
                               std::span<const TokenId> draft, const SamplingParams& params);

}  // namespace folio
