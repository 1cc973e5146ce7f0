// Proposer: guesses the next tokens of running sequences for speculative
// decoding; the target model then checks them all in one forward pass
// (see verifier.h). Proposals are deterministic (greedy), which keeps the
// verification rule simple and exact.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"

namespace folio {

struct ProposalRequest {
  SequenceId id = 0;
  std::span<const TokenId> tokens;  // prompt and accepted output; the last one is not yet in the target's cache
  int max_tokens = 0;               // propose at most this many
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // out[i] gets up to requests[i].max_tokens proposals (possibly none).
  virtual void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<TokenId>>& out) = 0;
  // Verification kept `num_accepted` of the proposals last made for `id`.
  virtual void accepted(SequenceId id, int num_accepted) {}
  // The sequence finished or was preempted: forget what is kept for it.
  virtual void release(SequenceId id) {}
  // Tokens it must feed before it can propose for these requests: those a
  // draft model skipped while nothing was asked of it (a step adds one or
  // two). A proposer that keeps no state has none.
  virtual std::int64_t backlog(std::span<const ProposalRequest> requests) const { return 0; }
  // What feeding it a token costs over what the target takes (0: free), the
  // estimate of a catch-up's cost until one is measured.
  virtual double relative_cost() const { return 0.0; }
};

}  // namespace folio
