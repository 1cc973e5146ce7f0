// RowSampler: one row of logits -> one token, in vLLM's order: logit bias and
// penalties, then temperature, top-k, top-p, min-p, then one draw. The
// reference of the sampling op (Backend::sample) row by row, and the filters
// and draws of the engine's host Sampler: both give the same bits. It holds
// only scratch reused across calls, so keep one per thread.
//
// How it treats its inputs:
// - A token mask (structured outputs), when the row has one, comes first:
//   every token whose bit is clear gets logit -inf, and the row is those
//   logits from then on, its logprobs included.
// - Logits are one row, [vocab_size]. NaN counts as -inf (never chosen); a row
//   with no finite logit left after bias and penalties is an error.
// - Greedy (temperature < kGreedyTemperature) is the argmax of the biased and
//   penalised logits, ties to the lowest id, and draws nothing from the RNG.
// - Every other choice draws exactly one uniform from the RNG. A token's
//   weight is sampler_math::softmax_weight(logit, top logit, temperature); its
//   probability is weight / (float) lane_sum(kept weights): see sampler_math.h.
// - top-k keeps exactly k tokens, ties to the lower id (vLLM keeps every token
//   tied with the k-th); so top_k = 1 is greedy. top-p works on the top-k
//   distribution renormalised, keeping the most likely tokens (ties to the
//   lower id) while the mass before them is < top_p. min-p keeps a token when
//   its probability is >= min_p x the top one.
// Cost per call is a few vectorised passes over the row and no allocation
// once the scratch has grown: greedy is one max and one scan; top-k <= 512 is
// one scan with a k-entry heap; larger k and top-p alone first count how many
// tokens lie within 4, 8, 16, ... temperatures of the top logit and sort only
// those, so nothing sorts the whole vocabulary.
// The same seed gives the same tokens on every platform: SamplingRng and the
// draw are integer arithmetic, and the exponentials and sums are folio's own,
// in a fixed order. (A compiler that fuses multiply-adds, as on AArch64, may
// move a weight by an ulp; that changes a draw only when it lands within that
// ulp of a boundary.)
#pragma once

#include <span>
#include <vector>

#include "backend/sampling/sampling_batch.h"
#include "backend/sampling/sampling_rng.h"

namespace folio {

class RowSampler {
 public:
  // The whole op for one row (SamplingRowParams says what it does): bias and
  // penalties from `adjustments`, the choice (or the verification of a
  // draft), and, when the row asks, the logprobs of its token.
  // mask: [ceil(vocab / 32)] words or more, empty for none.
  void run(std::span<const float> logits, const SamplingRowParams& params,
           std::span<const LogitAdjustment> adjustments, std::span<const std::uint32_t> mask, SampleResult& result,
           LogprobResult* logprobs);

  // Logits with the tokens `mask` forbids at -inf: `logits` itself when mask
  // is empty, else a copy in scratch (valid until the next call of masked()).
  // Throws when the mask has too few words for the row.
  std::span<const float> masked(std::span<const float> logits, std::span<const std::uint32_t> mask);

  // Logits after the row's adjustments: `logits` itself when there are none,
  // else a copy in scratch (valid until the next call).
  std::span<const float> adjusted(std::span<const float> logits, const SamplingRowParams& params,
                                  std::span<const LogitAdjustment> adjustments);

  // The token of biased and penalised logits (`processed`): greedy argmax, or
  // one draw from the filtered distribution. Only params' temperature, top_k,
  // top_p and min_p count here.
  TokenId choose(std::span<const float> processed, const SamplingRowParams& params, SamplingRng& rng);

  // The distribution choose() draws from, normalised, written to probs
  // ([vocab_size], zero outside the kept tokens; one-hot for greedy).
  // sample_from(probs, rng) then chooses what choose() would with that rng:
  // speculative decoding verifies drafts against these rows.
  void processed_probs(std::span<const float> processed, const SamplingRowParams& params, std::span<float> probs);

  // Draws one token from non-negative weights (they need not sum to 1; NaN
  // and negative weights count as 0), walking ids in order with one uniform.
  static TokenId sample_from(std::span<const float> probs, SamplingRng& rng);

  // The first id of the largest logit (NaN ignored); throws when the row has
  // no finite logit.
  static TokenId argmax(std::span<const float> logits);

  // out.logprob for `token` and out.top for the num_top most likely tokens
  // (at most kMaxLogprobs), all from log_softmax of the raw logits.
  static void fill_logprobs(std::span<const float> logits, TokenId token, int num_top, LogprobResult& out);

  // A token, its logit and its weight, ranked most likely first with ties to
  // lower ids; and a token kept by the filters with its weight, later its
  // probability (working records of row_sampler.cc).
  struct Candidate {
    float logit;
    TokenId id;
    float weight;
  };
  struct Kept {
    TokenId id;
    float weight;
  };

 private:
  // The distribution after temperature, top-k, top-p and min-p. Returns
  // true when it is in `dense` ([vocab_size]), false when it is in kept_
  // (at most 4,096 tokens, in id order; `dense` then holds scratch).
  bool build_distribution(std::span<const float> logits, const SamplingRowParams& params, std::span<float> dense);
  // Put the tokens that top-k (k above the heap's reach, with top-p after
  // it) or top-p alone keep in candidates_[0, count), the last of them in
  // rank order at count - 1, and return count. weights: [vocab_size].
  std::size_t select_top_k(std::span<const float> logits, std::span<const float> weights, float max_logit,
                           const SamplingRowParams& params);
  std::size_t select_top_p(std::span<const float> logits, std::span<const float> weights, float max_logit,
                           const SamplingRowParams& params);
  // kept_ = candidates_[0, count) with a positive weight at or above min_p,
  // then normalised.
  void keep_candidates(std::size_t count, float min_p);
  // Sorts kept_ by id and turns its weights into probabilities.
  void normalise_kept();

  std::vector<float> masked_;          // [vocab_size] logits under a token mask
  std::vector<float> work_;            // [vocab_size] biased and penalised logits
  std::vector<float> probs_;           // [vocab_size] the distribution choose() draws from
  std::vector<float> verify_;          // [vocab_size] a draft row's distribution
  std::vector<Candidate> candidates_;  // [vocab_size] at most: for top-k and top-p
  std::vector<Kept> kept_;             // [num_kept] the short-list distribution
};

}  // namespace folio
