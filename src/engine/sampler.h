// Sampler: one row of logits -> one token, in vLLM's order: logit bias and
// penalties, then temperature, top-k, top-p, min-p, then one draw. Pure logic;
// it holds only scratch buffers reused across calls, so keep one per thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/sampling_rng.h"
#include "engine/token_counts.h"
#include "tokenizer/vocab.h"

namespace folio {

struct TokenLogprob {
  TokenId token = -1;
  float logprob = 0.0f;
  bool operator==(const TokenLogprob&) const = default;
};

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

// How the Sampler treats its inputs, beyond SamplingParams' own comments:
// - Logits are one row, [vocab_size]. NaN counts as -inf (never chosen); a row
//   with no finite logit left after bias and penalties is an error.
// - Greedy (temperature < kGreedyTemperature) is the argmax of the biased and
//   penalised logits, ties to the lowest id, and draws nothing from the RNG.
// - Every other call draws exactly one uniform from the RNG. A token's weight
//   is sampler_math::softmax_weight(logit, top logit, temperature); its
//   probability is weight / (float) lane_sum(kept weights): see sampler_math.h.
// - top-k keeps exactly k tokens, ties to the lower id (vLLM keeps every token
//   tied with the k-th); so top_k = 1 is greedy. top-p works on the top-k
//   distribution renormalised, keeping the most likely tokens (ties to the
//   lower id) while the mass before them is < top_p. min-p keeps a token when
//   its probability is >= min_p x the top one.
// - Tokens counted in prompt_tokens or output_tokens must be < vocab_size.
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
class Sampler {
 public:
  // Chooses the next token of one sequence. prompt_tokens feeds only the
  // repetition penalty; output_tokens counts the tokens generated so far.
  SampledToken sample(std::span<const float> logits, const SamplingParams& params,
                      const TokenCounts& prompt_tokens, const TokenCounts& output_tokens,
                      SamplingRng& rng);

  // The distribution sample() draws from, normalised, written to probs
  // ([vocab_size], zero outside the kept tokens; one-hot for greedy).
  // sample_from(probs, rng) then chooses what sample() would with that rng:
  // speculative decoding verifies drafts against these rows.
  void processed_probs(std::span<const float> logits, const SamplingParams& params,
                       const TokenCounts& prompt_tokens, const TokenCounts& output_tokens,
                       std::span<float> probs);

  // Draws one token from non-negative weights (they need not sum to 1; NaN
  // and negative weights count as 0), walking ids in order with one uniform.
  static TokenId sample_from(std::span<const float> probs, SamplingRng& rng);

  // Sets out.logprob for `token` and out.top to the num_top most likely tokens
  // (at most kMaxLogprobs), all from log_softmax of the raw logits.
  static void fill_logprobs(std::span<const float> logits, TokenId token, int num_top,
                            SampledToken& out);

  // Working records of sampler.cc. A token, its logit and its weight,
  // ranked most likely first with ties to lower ids.
  struct Candidate {
    float logit;
    TokenId id;
    float weight;
  };
  // A token kept by the filters and its unnormalised weight, later its probability.
  struct Kept {
    TokenId id;
    float weight;
  };

 private:
  // Logits after logit_bias and penalties: `logits` itself when neither
  // applies, else a copy in work_.
  std::span<const float> biased_and_penalised(std::span<const float> logits,
                                              const SamplingParams& params,
                                              const TokenCounts& prompt_tokens,
                                              const TokenCounts& output_tokens);
  // The distribution after temperature, top-k, top-p and min-p. Returns
  // true when it is in `dense` ([vocab_size]), false when it is in kept_
  // (at most 4,096 tokens, in id order; `dense` then holds scratch).
  bool build_distribution(std::span<const float> logits, const SamplingParams& params,
                          std::span<float> dense);
  // Put the tokens that top-k (k above the heap's reach, with top-p after
  // it) or top-p alone keep in candidates_[0, count), the last of them in
  // rank order at count - 1, and return count. weights: [vocab_size].
  std::size_t select_top_k(std::span<const float> logits, std::span<const float> weights,
                           float max_logit, const SamplingParams& params);
  std::size_t select_top_p(std::span<const float> logits, std::span<const float> weights,
                           float max_logit, const SamplingParams& params);
  // Sorts kept_ by id and turns its weights into probabilities.
  void normalise_kept();

  std::vector<float> work_;            // [vocab_size] biased and penalised logits
  std::vector<float> probs_;           // [vocab_size] the distribution sample() draws from
  std::vector<Candidate> candidates_;  // [vocab_size] at most: for top-k and top-p
  std::vector<Kept> kept_;             // [num_kept] the short-list distribution
};

}  // namespace folio
