#include "engine/speculative/ngram_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace folio {

NgramProposer::NgramProposer(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n) fail("n-gram sizes must satisfy 1 <= min ({}) <= max ({})", min_n, max_n);
}

std::vector<TokenId> NgramProposer::lookup(std::span<const TokenId> tokens, int k) const {
  const auto len = static_cast<std::int64_t>(tokens.size());
  for (int n = max_n_; n >= min_n_; --n) {
    if (len <= n) continue;
    const auto pattern = tokens.subspan(static_cast<std::size_t>(len - n));
    // Latest earlier occurrence: its end must leave at least one token after it.
    for (std::int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(pattern.begin(), pattern.end(), tokens.begin() + start)) continue;
      const std::int64_t from = start + n;
      const std::int64_t count = std::min<std::int64_t>(k, len - from);
      return std::vector<TokenId>(tokens.begin() + from, tokens.begin() + from + count);
    }
  }
  return {};
}

void NgramProposer::propose(std::span<const ProposalRequest> requests, std::vector<std::vector<TokenId>>& out) {
  out.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) out[i] = lookup(requests[i].tokens, requests[i].max_tokens);
}

}  // namespace folio
