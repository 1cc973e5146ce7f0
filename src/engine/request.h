// EngineRequest: one generation request as the engine takes it: prompt token
// ids and sampling parameters (n completions), with scheduling hints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace folio {

// The engine's id of a request (its stream's id). Each of its n completions
// is a sequence with a SequenceId of its own (kv/kv_types.h).
using RequestId = std::uint64_t;

struct EngineRequest {
  std::vector<TokenId> prompt;
  SamplingParams params;
  int priority = 0;          // lower runs first when the engine schedules by priority
  std::string cache_salt;    // prefix-cache isolation (per tenant)
  bool speculative = true;   // may use the server's speculative decoding
};

// Why a request cannot run on a model, in words for whoever sent it: its
// prompt (empty, or an id outside the vocabulary), its length against the
// context, or a sampling parameter (SamplingParams::validate). The one check
// of a request: Engine::submit refuses by it, and the server asks it first so
// that its error can name the field.
struct RequestProblem {
  enum class Kind { kPrompt, kContextLength, kParam };
  Kind kind = Kind::kParam;
  std::string param;  // kParam: the parameter's name
  std::string message;
};
std::optional<RequestProblem> check_request(const std::vector<TokenId>& prompt, const SamplingParams& params,
                                            std::int64_t vocab_size, int max_model_len);

}  // namespace folio
