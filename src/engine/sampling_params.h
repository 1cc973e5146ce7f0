// SamplingParams: how one request turns logits into tokens and when it stops,
// with the meanings of the OpenAI API and vLLM; validate() names any value out
// of range, so a request that passes it never surprises the Sampler.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/sampling/sampling_batch.h"
#include "engine/constraint/constraint_compiler.h"
#include "engine/reasoning_budget.h"
#include "tokenizer/vocab.h"

namespace folio {

// Most completions one request may ask for (OpenAI's limit for n).
inline constexpr int kMaxCompletions = 128;
// Bound of a logit_bias value (OpenAI: -100 bans a token, 100 forces it).
inline constexpr float kMaxLogitBias = 100.0f;
// Bound of presence_penalty and frequency_penalty (OpenAI).
inline constexpr float kMaxOpenAiPenalty = 2.0f;

// A request value out of range: the parameter (OpenAI's name) and what to do.
struct InvalidParam {
  std::string param;
  std::string message;
};

struct SamplingParams {
  // Softmax temperature; 0 (or below kGreedyTemperature) means greedy argmax.
  float temperature = 1.0f;
  // Keep the k most likely tokens; 0 or -1 turns it off.
  int top_k = 0;
  // Keep the smallest set of most likely tokens whose mass reaches top_p;
  // 1 turns it off.
  float top_p = 1.0f;
  // Keep tokens whose probability is at least min_p x the top probability;
  // 0 turns it off.
  float min_p = 0.0f;
  // vLLM semantics, over the tokens of the prompt and of the output: a
  // positive logit is divided by it, a negative one multiplied; 1 is off.
  float repetition_penalty = 1.0f;
  // OpenAI semantics, over output tokens only: logit -= presence_penalty once
  // a token has appeared, and -= frequency_penalty x its count.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Added to a token's logit before everything else.
  std::map<TokenId, float> logit_bias;
  // Same seed, same output; without one the engine supplies a fresh stream.
  std::optional<std::int64_t> seed;
  // Unset: no logprobs. k: the chosen token's logprob plus the k most likely
  // tokens' (0..kMaxLogprobs), from the model's unprocessed distribution.
  std::optional<int> logprobs;
  // Unset: none. k: every prompt token after the first gets its logprob,
  // rank and the k most likely tokens (0..kMaxLogprobs) at the position
  // before it, from the model's raw distribution (vLLM's prompt_logprobs).
  // Such a prompt is computed in full, not read from the prefix cache.
  std::optional<int> prompt_logprobs;
  // Most tokens to generate; unset: until the context is full.
  std::optional<int> max_tokens;
  std::vector<std::string> stop;            // stop strings, not part of the output (unless the next)
  bool include_stop_str_in_output = false;  // the stop string that ended it ends the text too
  bool skip_special_tokens = true;          // false: control tokens appear in the text as themselves
  std::vector<TokenId> stop_token_ids;      // stop tokens besides end-of-generation
  bool ignore_eos = false;                  // keep going past end-of-generation tokens
  // Fewest tokens to generate (vLLM): before this many, the tokens that would
  // end the completion (end-of-generation, unless ignore_eos, and
  // stop_token_ids) cannot be sampled and stop strings do not end it. It
  // does not hold a structured output open: the constraint decides its end.
  int min_tokens = 0;
  // The tokens min_tokens holds back, sorted: filled by the Sequence from the
  // vocabulary (callers leave it empty); empty when min_tokens is 0.
  std::vector<TokenId> held_back;
  int n = 1;                                // completions for this prompt
  // Structured output: every token is one the constraint allows, and the
  // completion stops (finish_reason stop) when the constraint is complete.
  // Null: unconstrained, and the sampler does no extra work.
  std::shared_ptr<const CompiledConstraint> constraint;
  // Thinking bounded: once max_tokens thinking tokens are out, the closing
  // tokens are forced (not with a constraint, nor with speculative decoding:
  // the engine turns it off for such a request).
  ReasoningBudget reasoning_budget;

  bool is_greedy() const { return temperature < kGreedyTemperature; }
  // Whether held_back applies to the token after `num_output` output tokens.
  bool holds_back(std::int64_t num_output) const { return num_output < min_tokens && !held_back.empty(); }

  // The first value out of range, as a message that names the parameter, the
  // value and the allowed range; nullopt when all are valid. Token ids are
  // checked against vocab_size, the number of logits the model produces.
  // The one check of these values: the server and the engine both call it.
  std::optional<InvalidParam> validate(std::int64_t vocab_size) const;
};

}  // namespace folio
