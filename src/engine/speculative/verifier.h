// Verification of proposed tokens against the target model's logits, so that
// speculative decoding writes exactly what the target alone would: greedy
// keeps the longest run of proposals equal to the target's argmax, plus the
// target's next token; sampling accepts proposal d with probability p(d)
// (proposals are deterministic, q(d) = 1, so min(1, p/q) = p(d)) and on a
// rejection draws from p with d removed (the normalised max(0, p - q)), which
// leaves the output distribution the target's. Pure logic.
#pragma once

#include <span>
#include <vector>

#include "engine/sampler.h"

namespace folio {

struct VerifyResult {
  std::vector<SampledToken> emitted;  // accepted proposals, then one token of the target's
  int num_accepted = 0;               // proposals accepted
};

// logits: [draft.size() + 1, vocab_size] rows, row i scoring the position
// after the i-th fed token. output_counts is extended with the tokens as
// they are accepted and restored before returning. masks: empty, or
// [draft.size() + 1, mask_words] token masks, row i's for logits row i (a
// structured output: the constraint's state after the first i proposals).
VerifyResult verify_draft(Sampler& sampler, std::span<const float> logits, std::int64_t vocab_size,
                          std::span<const TokenId> draft, const SamplingParams& params,
                          const TokenCounts& prompt_counts, TokenCounts& output_counts, SamplingRng& rng,
                          std::vector<float>& scratch, std::span<const std::uint32_t> masks = {},
                          std::size_t mask_words = 0);

}  // namespace folio
