#include "engine/sampling_params.h"

#include <fmt/format.h>

#include <cmath>

namespace folio {

namespace {

// "x in [lo, hi]" that is false for NaN.
bool in_closed(float x, float lo, float hi) { return x >= lo && x <= hi; }

}  // namespace

std::optional<InvalidParam> SamplingParams::validate(std::int64_t vocab_size) const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return InvalidParam{"temperature", fmt::format("temperature = {} is out of range: it must be a finite number >= 0 "
                       "(0 means greedy, 1 the model's own distribution)",
                       temperature)};
  }
  if (top_k < -1) {
    return InvalidParam{"top_k", fmt::format(
        "top_k = {} is out of range: it must be >= 1, or 0 or -1 to turn top-k off", top_k)};
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return InvalidParam{"top_p", fmt::format("top_p = {} is out of range: it must be in (0, 1] (1 turns top-p off)",
                       top_p)};
  }
  if (!in_closed(min_p, 0.0f, 1.0f)) {
    return InvalidParam{"min_p", fmt::format("min_p = {} is out of range: it must be in [0, 1] (0 turns min-p off)",
                       min_p)};
  }
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return InvalidParam{"repetition_penalty", fmt::format("repetition_penalty = {} is out of range: it must be a finite number > 0 "
                       "(1 turns it off, above 1 discourages repeats)",
                       repetition_penalty)};
  }
  if (!in_closed(presence_penalty, -kMaxOpenAiPenalty, kMaxOpenAiPenalty)) {
    return InvalidParam{"presence_penalty", fmt::format(
        "presence_penalty = {} is out of range: it must be in [{}, {}] (0 turns it off)",
        presence_penalty, -kMaxOpenAiPenalty, kMaxOpenAiPenalty)};
  }
  if (!in_closed(frequency_penalty, -kMaxOpenAiPenalty, kMaxOpenAiPenalty)) {
    return InvalidParam{"frequency_penalty", fmt::format(
        "frequency_penalty = {} is out of range: it must be in [{}, {}] (0 turns it off)",
        frequency_penalty, -kMaxOpenAiPenalty, kMaxOpenAiPenalty)};
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab_size) {
      return InvalidParam{"logit_bias", fmt::format(
          "logit_bias names token {}, which is not in the vocabulary: token ids must be in [0, {}]",
          token, vocab_size - 1)};
    }
    if (!in_closed(bias, -kMaxLogitBias, kMaxLogitBias)) {
      return InvalidParam{"logit_bias", fmt::format("logit_bias for token {} = {} is out of range: it must be in [{}, {}]",
                         token, bias, -kMaxLogitBias, kMaxLogitBias)};
    }
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return InvalidParam{"logprobs", fmt::format("logprobs = {} is out of range: it must be in [0, {}] (0 returns only the "
                       "chosen token's logprob)",
                       *logprobs, kMaxLogprobs)};
  }
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > kMaxLogprobs)) {
    return InvalidParam{"prompt_logprobs", fmt::format(
        "prompt_logprobs = {} is out of range: it must be in [0, {}] (0 returns only each prompt "
        "token's logprob)",
        *prompt_logprobs, kMaxLogprobs)};
  }
  if (max_tokens && *max_tokens < 1) {
    return InvalidParam{"max_tokens", fmt::format("max_tokens = {} is out of range: it must be >= 1, or left out to generate "
                       "until the context is full",
                       *max_tokens)};
  }
  if (min_tokens < 0) return InvalidParam{"min_tokens", fmt::format("min_tokens = {} is out of range: it must be >= 0", min_tokens)};
  if (max_tokens && min_tokens > *max_tokens) {
    return InvalidParam{"min_tokens", fmt::format(
        "min_tokens = {} is more than max_tokens = {}: the completion could never reach it; lower "
        "min_tokens or raise max_tokens",
        min_tokens, *max_tokens)};
  }
  for (std::size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) {
      return InvalidParam{"stop", fmt::format("stop[{}] is an empty string: every stop string needs at least one "
                         "character; remove it",
                         i)};
    }
  }
  for (TokenId token : stop_token_ids) {
    if (token < 0 || token >= vocab_size) {
      return InvalidParam{"stop_token_ids", fmt::format("stop_token_ids contains {}, which is not in the vocabulary: token ids "
                         "must be in [0, {}]",
                         token, vocab_size - 1)};
    }
  }
  if (n < 1 || n > kMaxCompletions) {
    return InvalidParam{"n", fmt::format("n = {} is out of range: it must be in [1, {}]", n, kMaxCompletions)};
  }
  if (reasoning_budget.max_tokens < -1)
    return InvalidParam{
        "max_reasoning_tokens",
        fmt::format("max_reasoning_tokens = {} is out of range: it must be >= 0", reasoning_budget.max_tokens)};
  if (reasoning_budget.active() && constraint)
    return InvalidParam{"max_reasoning_tokens",
                        "a reasoning budget cannot be combined with a structured output (response_format, "
                        "structured_outputs, tools with tool_choice required): the forced end of thinking would "
                        "break the constraint; drop one of them"};
  return std::nullopt;
}

}  // namespace folio
