// EngineRequest: one generation request as the engine takes it: prompt token
// ids and sampling parameters (n completions), with scheduling hints.
#pragma once

#include <cstdint>
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

}  // namespace folio
