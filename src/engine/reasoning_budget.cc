#include "engine/reasoning_budget.h"

#include <utility>

namespace folio {
namespace {

// How much of `marker` the tokens seen end with, after `token` follows the
// first `matched` of them. The markers are one or two tokens, so a restart
// at the first token is all the backtracking they need.
std::size_t advance(const std::vector<TokenId>& marker, std::size_t matched, TokenId token) {
  if (matched < marker.size() && marker[matched] == token) return matched + 1;
  return !marker.empty() && marker[0] == token ? 1 : 0;
}

}  // namespace

ReasoningBudgetTracker::ReasoningBudgetTracker(ReasoningBudget budget)
    : budget_(std::move(budget)), inside_(budget_.starts_inside) {}

std::optional<TokenId> ReasoningBudgetTracker::forced() const {
  if (!budget_.active() || !inside_ || spent_ < budget_.max_tokens) return std::nullopt;
  return budget_.close[close_matched_];
}

void ReasoningBudgetTracker::take(TokenId token) {
  if (!budget_.active()) return;
  if (!inside_) {
    open_matched_ = advance(budget_.open, open_matched_, token);
    if (!budget_.open.empty() && open_matched_ == budget_.open.size()) {
      inside_ = true;
      open_matched_ = 0;
      close_matched_ = 0;
    }
    return;
  }
  const bool forcing = spent_ >= budget_.max_tokens;
  if (!forcing) ++spent_;
  close_matched_ = forcing ? close_matched_ + 1 : advance(budget_.close, close_matched_, token);
  if (close_matched_ == budget_.close.size()) {
    inside_ = false;
    close_matched_ = 0;
  }
}

}  // namespace folio
