// What the engine streams back for a request: per completion, the new token
// ids, the new text (UTF-8 safe, never part of a stop string), logprobs, and
// at the end a finish reason; with the request's token usage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace folio {

enum class FinishReason { kStop, kLength, kAbort };

// "stop", "length", "abort": the words OpenAI clients expect.
const char* finish_reason_name(FinishReason reason);

struct CompletionDelta {
  int index = 0;                       // which of the request's n completions
  std::vector<TokenId> token_ids;      // tokens sampled since the last delta
  std::string text;                    // text they complete
  std::vector<SampledToken> logprobs;  // one per token when logprobs were asked for
  std::optional<FinishReason> finish_reason;
  std::string stop_reason;            // the stop string or stop token that ended it
  std::optional<TokenId> stop_token;  // ... when it was one of stop_token_ids
};

// A prompt token's logprob (prompt_logprobs) under the model's raw
// distribution at the position before it, its rank there, and the most
// likely tokens at that position.
struct PromptTokenLogprob {
  SampledToken token;  // the prompt token, its logprob and the top tokens
  int rank = 1;        // 1 + the tokens more likely than it
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens served from the prefix cache
};

struct RequestOutput {
  std::vector<CompletionDelta> deltas;
  bool finished = false;  // every completion has finished
  Usage usage;            // up to date at every output, final when finished
  // prompt_logprobs: one per prompt token after the first, all in the first
  // output that carries tokens.
  std::vector<PromptTokenLogprob> prompt_logprobs;
  std::string error;      // set when the engine could not serve the request
};

}  // namespace folio
