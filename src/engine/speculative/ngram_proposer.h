// NgramProposer: prompt-lookup speculation. The last n tokens of a sequence
// (n from max_n down to min_n) are looked up in its earlier tokens, prompt
// and output; at the latest earlier match, the k tokens that followed it are
// proposed. Pays off when the output quotes or edits its input. Pure logic.
#pragma once

#include "engine/speculative/proposer.h"

namespace folio {

class NgramProposer : public Proposer {
 public:
  NgramProposer(int min_n, int max_n);
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<TokenId>>& out) override;

  // The proposals for one token sequence.
  std::vector<TokenId> lookup(std::span<const TokenId> tokens, int k) const;

 private:
  int min_n_;
  int max_n_;
};

}  // namespace folio
