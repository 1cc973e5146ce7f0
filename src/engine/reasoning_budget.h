// ReasoningBudget: the most tokens a completion may think for (between the
// tokens that open and close its thinking, <think> and </think>). Once they
// are spent the closing tokens are forced, one per step in place of what was
// sampled, and the answer follows, as llama-server's --reasoning-budget does.
// The budget counts all the completion's thinking: thinking opened again
// after it is spent is closed at once.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "core/ids.h"

namespace folio {

struct ReasoningBudget {
  int max_tokens = -1;         // thinking tokens before the close is forced; -1: no budget
  std::vector<TokenId> open;   // the tokens that open thinking
  std::vector<TokenId> close;  // the tokens that close it: what is forced
  bool starts_inside = false;  // the prompt ends inside open thinking

  bool active() const { return max_tokens >= 0 && !close.empty(); }
};

// One completion's place against its budget: fed every output token, it
// says which token must come next, if any.
class ReasoningBudgetTracker {
 public:
  explicit ReasoningBudgetTracker(ReasoningBudget budget);

  // The token the budget forces next; nullopt when sampling decides.
  std::optional<TokenId> forced() const;
  // An output token, forced or sampled.
  void take(TokenId token);

  bool thinking() const { return inside_; }
  int num_thinking_tokens() const { return spent_; }

 private:
  ReasoningBudget budget_;
  bool inside_;
  int spent_ = 0;                  // thinking tokens so far, over the whole completion
  std::size_t open_matched_ = 0;   // tokens of `open` just seen, outside thinking
  std::size_t close_matched_ = 0;  // tokens of `close` just seen or forced, inside
};

}  // namespace folio
