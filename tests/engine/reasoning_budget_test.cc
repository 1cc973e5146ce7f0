// The reasoning budget's tracker: it forces the closing tokens once the
// thinking has used its budget, counts thinking over the whole completion,
// lets a close the model writes itself end the thinking, and does nothing
// without a budget or outside thinking.
#include "engine/reasoning_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace folio {
namespace {

constexpr TokenId kOpen = 100, kClose1 = 200, kClose2 = 201;

ReasoningBudget budget(int max_tokens, bool starts_inside = false) {
  ReasoningBudget b;
  b.max_tokens = max_tokens;
  b.open = {kOpen};
  b.close = {kClose1, kClose2};
  b.starts_inside = starts_inside;
  return b;
}

// Runs `sampled` through the tracker as the engine does (a forced token
// replaces the sampled one) and returns what was emitted.
std::vector<TokenId> run(ReasoningBudgetTracker& t, const std::vector<TokenId>& sampled) {
  std::vector<TokenId> out;
  for (TokenId s : sampled) {
    const TokenId token = t.forced().value_or(s);
    t.take(token);
    out.push_back(token);
  }
  return out;
}

TEST(ReasoningBudgetTest, ForcesTheCloseWhenSpent) {
  ReasoningBudgetTracker t(budget(3));
  EXPECT_EQ(run(t, {1, kOpen, 2, 3, 4, 5, 6, 7, 8}), (std::vector<TokenId>{1, kOpen, 2, 3, 4, kClose1, kClose2, 7, 8}));
  EXPECT_FALSE(t.thinking());
  EXPECT_EQ(t.num_thinking_tokens(), 3);
}

TEST(ReasoningBudgetTest, APromptThatOpensThinkingCountsFromTheFirstToken) {
  ReasoningBudgetTracker t(budget(2, /*starts_inside=*/true));
  EXPECT_EQ(run(t, {5, 6, 7, 8, 9}), (std::vector<TokenId>{5, 6, kClose1, kClose2, 9}));
  ReasoningBudgetTracker zero(budget(0, true));
  EXPECT_EQ(run(zero, {5, 6, 7}), (std::vector<TokenId>{kClose1, kClose2, 7}));
}

TEST(ReasoningBudgetTest, AModelThatClosesInTimeIsLeftAlone) {
  ReasoningBudgetTracker t(budget(10));
  EXPECT_EQ(run(t, {kOpen, 2, kClose1, kClose2, 3, 4}), (std::vector<TokenId>{kOpen, 2, kClose1, kClose2, 3, 4}));
  EXPECT_FALSE(t.forced().has_value());
  // Half a close, then the budget runs out: the rest of the close is forced.
  ReasoningBudgetTracker half(budget(2));
  EXPECT_EQ(run(half, {kOpen, 2, kClose1, 9, 9}), (std::vector<TokenId>{kOpen, 2, kClose1, kClose2, 9}));
}

TEST(ReasoningBudgetTest, TheBudgetIsTheWholeCompletions) {
  // The first thinking spends 3 (a close the model writes is thinking too), the second the last one.
  ReasoningBudgetTracker t(budget(4));
  EXPECT_EQ(run(t, {kOpen, 2, kClose1, kClose2, kOpen, 3, 4, 5}),
            (std::vector<TokenId>{kOpen, 2, kClose1, kClose2, kOpen, 3, kClose1, kClose2}));
}

TEST(ReasoningBudgetTest, NoBudgetNothingForced) {
  ReasoningBudgetTracker none(ReasoningBudget{});
  EXPECT_EQ(run(none, {kOpen, 1, 2, 3}), (std::vector<TokenId>{kOpen, 1, 2, 3}));
  ReasoningBudgetTracker outside(budget(0));
  EXPECT_EQ(run(outside, {1, 2, 3}), (std::vector<TokenId>{1, 2, 3}));
}

}  // namespace
}  // namespace folio
