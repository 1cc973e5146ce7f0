// Sequence: one completion's generation state in the engine: the sampling
// state (params, RNG, token counts) and the output side - sampled tokens in,
// stop tokens and stop strings checked, text decoded incrementally (never
// half a UTF-8 character) and held back while it may still become a stop
// string, deltas out. A constrained sequence's matcher takes every token it
// appends, and a complete constraint ends it.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/constraint/constraint_matcher.h"
#include "engine/request_output.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "tokenizer/incremental_decoder.h"

namespace folio {

class Sequence {
 public:
  Sequence(const Tokenizer& tokenizer, const SamplingParams& params, std::span<const TokenId> prompt, int index,
           SamplingRng rng);

  // Adds a sampled token; returns true when it ends the completion (an
  // end-of-generation or stop token, a stop string, or max_tokens).
  bool append(const SampledToken& token);
  // Ends the completion from outside (context full, abort); text held back
  // for a stop string that can no longer complete comes out first.
  void finish(FinishReason reason);

  // What is new since the last call (empty text and tokens if nothing).
  CompletionDelta take_delta();
  bool has_delta() const { return !delta_.token_ids.empty() || !delta_.text.empty() || finish_reported_ != finished(); }

  bool finished() const { return finish_reason_.has_value(); }
  std::optional<FinishReason> finish_reason() const { return finish_reason_; }
  int num_output_tokens() const { return static_cast<int>(output_.size()); }
  std::span<const TokenId> output() const { return output_; }

  const SamplingParams& params() const { return params_; }
  // The token the reasoning budget forces next, in place of the sampled one.
  std::optional<TokenId> forced_token() const { return budget_.forced(); }
  // The structured output's matcher; null when unconstrained.
  ConstraintMatcher* matcher() { return matcher_.get(); }
  SamplingRng& rng() { return rng_; }
  const TokenCounts& prompt_counts() const { return prompt_counts_; }
  const TokenCounts& output_counts() const { return output_counts_; }
  // Verification extends the counts with proposals as it accepts them and
  // restores them before returning.
  TokenCounts& mutable_output_counts() { return output_counts_; }

 private:
  void release_text(bool final);

  const Tokenizer& tokenizer_;
  SamplingParams params_;
  int index_;
  SamplingRng rng_;
  TokenCounts prompt_counts_;
  TokenCounts output_counts_;
  IncrementalDecoder decoder_;
  std::vector<TokenId> output_;
  std::string held_;  // decoded text not yet released (may start a stop string)
  CompletionDelta delta_;
  std::optional<FinishReason> finish_reason_;
  bool finish_reported_ = false;
  std::unique_ptr<ConstraintMatcher> matcher_;
  ReasoningBudgetTracker budget_;
};

}  // namespace folio
