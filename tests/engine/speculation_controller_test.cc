// SpeculationController against simulated machines: step costs as a function
// of the proposals, acceptance drawn from a fixed rate. What it must do: find
// the fastest choice, none included, spend few steps looking elsewhere, and
// follow a machine whose costs change.
#include "engine/speculative/speculation_controller.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <vector>

namespace folio {
namespace {

struct Simulation {
  SpeculationController& controller;
  double alpha;                                  // each proposal is accepted with this chance
  std::function<double(int batch, int k)> cost;  // seconds of a decode step
  SpeculationController::Outlook outlook{};      // what the first proposals would cost beyond the step
  double catch_up = 0;                           // seconds the first proposals after none spend first
  std::mt19937 rng{7};
  int last_k = 0;  // the previous step's choice

  // Runs `steps` decode steps of `batch` speculating sequences; returns how
  // often each k was chosen, and adds the tokens emitted and time spent.
  std::map<int, int> run(int steps, int batch, double* tokens = nullptr, double* seconds = nullptr) {
    std::vector<SequenceId> ids;
    for (int i = 0; i < batch; ++i) ids.push_back(static_cast<SequenceId>(i + 1));
    std::bernoulli_distribution keep(alpha);
    std::map<int, int> chosen;
    for (int s = 0; s < steps; ++s) {
      const int k = controller.choose(ids, batch, outlook);
      if (k > 0 && last_k == 0 && seconds) *seconds += catch_up;
      last_k = k;
      ++chosen[k];
      for (SequenceId id : ids) {
        if (k == 0) {
          if (tokens) *tokens += 1;
          continue;
        }
        controller.proposed(id, k);
        int accepted = 0;
        while (accepted < k && keep(rng)) ++accepted;
        controller.verified(id, k, accepted);
        if (tokens) *tokens += accepted + 1;
      }
      const double t = cost(batch, k);
      if (seconds) *seconds += t;
      controller.step_done(t, /*decode_only=*/true);
    }
    return chosen;
  }
};

TEST(SpeculationController, TheFixedPolicyAlwaysProposesTheMost) {
  SpeculationController c(4, /*adaptive=*/false);
  const std::vector<SequenceId> ids{1, 2};
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(c.choose(ids, 2), 4);
    c.step_done(1.0, true);
  }
}

TEST(SpeculationController, NothingIsProposedWithoutCandidates) {
  SpeculationController c(4, true);
  EXPECT_EQ(c.choose({}, 3), 0);
}

TEST(SpeculationController, ExpensiveProposalsAreTurnedOff) {
  // A draft step costs as much as a target step and verification doubles
  // it: even at 90 % acceptance speculation loses, so it must stop.
  SpeculationController c(4, true);
  Simulation sim{c, 0.9, [](int, int k) { return 1.0 + 1.0 * k + (k > 0 ? 1.0 : 0.0); }};
  sim.run(100, 1);  // warm-up: every choice is tried
  double tokens = 0, seconds = 0;
  const auto chosen = sim.run(2000, 1, &tokens, &seconds);
  EXPECT_GE(chosen.at(0), 1900) << "k=0 chosen " << chosen.at(0) << " of 2000";
  // The steps spent elsewhere cost little: within 3 % of never speculating.
  EXPECT_GE(tokens / seconds, 0.97 * 1.0);
}

TEST(SpeculationController, CheapAcceptedProposalsRunAtTheMost) {
  // n-gram proposals cost nothing to make and verification little more.
  SpeculationController c(4, true);
  Simulation sim{c, 0.8, [](int, int k) { return 1.0 + 0.05 * k; }};
  sim.run(100, 1);
  double tokens = 0, seconds = 0;
  const auto chosen = sim.run(2000, 1, &tokens, &seconds);
  EXPECT_GE(chosen.at(4), 1900);
  // Four proposals at 0.8 earn 1 + .8 + .64 + .51 + .41 = 3.36 tokens for 1.2 s.
  EXPECT_GT(tokens / seconds, 0.95 * 3.36 / 1.2);
}

TEST(SpeculationController, AMiddleChoiceWinsWhereItIsBest) {
  // Rate(k) = E(k) / (1 + 0.3 k) at alpha 0.7: 1.0, 1.31, 1.37, 1.26 (k = 0, 1, 2, 4).
  SpeculationController c(4, true);
  Simulation sim{c, 0.7, [](int, int k) { return 1.0 + 0.3 * k; }};
  sim.run(200, 1);
  const auto chosen = sim.run(2000, 1);
  EXPECT_GE(chosen.at(2), 1500);
}

TEST(SpeculationController, EachBatchSizeHasItsOwnChoice) {
  // Alone, a step is memory-bound and proposals ride along; at 32 sequences
  // it is compute-bound and every proposal costs as much as a token.
  SpeculationController c(4, true);
  auto cost = [](int batch, int k) { return batch == 1 ? 1.0 + 0.05 * k : 0.1 * batch * (1 + k); };
  Simulation sim{c, 0.6, cost};
  sim.run(100, 1);
  sim.run(100, 32);
  EXPECT_GE(sim.run(500, 1).at(4), 450);
  EXPECT_GE(sim.run(500, 32).at(0), 450);
}

TEST(SpeculationController, AChangeOfCostIsFollowed) {
  SpeculationController c(4, true);
  bool cheap = false;
  Simulation sim{c, 0.85, [&](int, int k) { return cheap ? 1.0 + 0.05 * k : 1.0 + 1.5 * k; }};
  sim.run(1000, 1);
  EXPECT_GE(sim.run(500, 1).at(0), 450);
  cheap = true;  // e.g. another tenant left the machine
  sim.run(3000, 1);
  EXPECT_GE(sim.run(500, 1)[4], 400);
}

TEST(SpeculationController, ExpectedTokensFollowEachSequencesAcceptance) {
  SpeculationController c(4, true);
  for (int i = 0; i < 20; ++i) {
    c.proposed(1, 4);
    c.verified(1, 4, 4);  // always right
    c.proposed(2, 4);
    c.verified(2, 4, 0);  // always wrong
  }
  EXPECT_GT(c.expected_tokens(1, 4), 4.0);
  EXPECT_LT(c.expected_tokens(2, 4), 1.3);
  EXPECT_DOUBLE_EQ(c.expected_tokens(1, 0), 1.0);
  // A new sequence starts from the pooled rate, between the two.
  const double fresh = c.expected_tokens(3, 4);
  EXPECT_GT(fresh, c.expected_tokens(2, 4));
  EXPECT_LT(fresh, c.expected_tokens(1, 4));
  // An n-gram lookup that finds nothing most of the time earns less.
  for (int i = 0; i < 20; ++i) c.proposed(4, i % 4 == 0 ? 4 : 0);
  EXPECT_LT(c.expected_tokens(4, 4), fresh);
  c.release(1);  // forgotten: a new sequence again
  EXPECT_DOUBLE_EQ(c.expected_tokens(1, 4), c.expected_tokens(3, 4));
}

TEST(SpeculationController, OnlyRepeatedDecodeStepsAreMeasured) {
  SpeculationController c(2, true);
  const std::vector<SequenceId> ids{1};
  // The first steps try 0, 1 and 2 proposals (each paying), two steps each;
  // the first of each pair follows a switch and is not kept.
  auto cost = [](int k) { return 1.0 + 0.01 * k; };
  std::vector<int> ks;
  for (int i = 0; i < 6; ++i) {
    ks.push_back(c.choose(ids, 1));
    c.step_done(i % 2 == 0 ? 100.0 : cost(ks.back()), true);
  }
  EXPECT_EQ(ks, (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_DOUBLE_EQ(c.step_seconds(1, 0), cost(0));
  EXPECT_DOUBLE_EQ(c.step_seconds(1, 1), cost(1));
  EXPECT_DOUBLE_EQ(c.step_seconds(1, 2), cost(2));
  EXPECT_LT(c.step_seconds(8, 0), 0.0);  // another bucket: not measured
  // A step that fed a prompt is not kept, nor the one after it.
  const int k = c.choose(ids, 1);
  c.step_done(50.0, /*decode_only=*/false);
  EXPECT_EQ(c.choose(ids, 1), k);
  c.step_done(60.0, true);
  EXPECT_DOUBLE_EQ(c.step_seconds(1, k), cost(k));
}

TEST(SpeculationController, TheFirstClimbStopsWhereAChoiceLoses) {
  // One proposal already loses: two and four are not tried at first; the
  // most (eight) gets one look, since at 0.7 eight proposals costing what
  // one did would win.
  SpeculationController c(8, true);
  Simulation sim{c, 0.7, [](int, int k) { return 1.0 + 1.0 * k; }};
  const auto chosen = sim.run(15, 1);
  EXPECT_EQ(chosen.at(0), 11);
  EXPECT_EQ(chosen.at(1), 2);
  EXPECT_EQ(chosen.at(8), 2);
  EXPECT_LT(c.step_seconds(1, 2), 0.0);
  EXPECT_LT(c.step_seconds(1, 4), 0.0);
}

TEST(SpeculationController, NoLookAtTheMostWhereEvenCheapTheyWouldLose) {
  // A draft model on text it rarely guesses (0.1): one proposal loses, and
  // eight, even at one proposal's cost, would emit too few tokens to win.
  SpeculationController c(8, true);
  Simulation sim{c, 0.1, [](int, int k) { return 1.0 + 0.5 * k; }};
  const auto chosen = sim.run(15, 1);
  EXPECT_EQ(chosen.at(1), 2);
  EXPECT_EQ(chosen.count(8), 0u);
  EXPECT_LT(c.step_seconds(1, 8), 0.0);
}

TEST(SpeculationController, ADraftsFurtherStepsCountAgainstTheLookAtTheMost) {
  // A draft model costing 0.35 of a target step per token: one proposal
  // costs 2.0 (its first step carries the catch-up and a wider
  // verification), each further one 0.35 more. At 0.6 one loses (1.6 tokens
  // for 2.0 s); eight at one's cost would win (2.5 tokens for 2.0 s), but
  // with seven more draft steps they cost 4.45 s: no look at them. A lookup
  // (relative cost 0) on the same machine gets its look.
  const auto cost = [](int, int k) { return k == 0 ? 1.0 : 1.65 + 0.35 * k; };
  SpeculationController draft(8, true);
  Simulation d{draft, 0.6, cost};
  d.outlook.relative_cost = 0.35;
  const auto chosen = d.run(15, 1);
  EXPECT_EQ(chosen.at(1), 2);
  EXPECT_EQ(chosen.count(8), 0u);
  EXPECT_LT(draft.step_seconds(1, 8), 0.0);
  SpeculationController lookup(8, true);
  Simulation l{lookup, 0.6, cost};
  EXPECT_EQ(l.run(15, 1).at(8), 2);
}

TEST(SpeculationController, AFirstProposalThatLosesDoesNotHideMoreThatWin) {
  // A draft model: a fixed cost for proposing at all (its catch-up on the
  // verified tokens, a wider verification) and a little per proposal. One
  // proposal at 0.85 loses (1.85 tokens for 2.0 s), four win (3.8 for 2.6).
  SpeculationController c(4, true);
  Simulation sim{c, 0.85, [](int, int k) { return k == 0 ? 1.0 : 1.8 + 0.2 * k; }};
  sim.run(100, 1);
  EXPECT_GE(sim.run(1000, 1)[4], 900);
}

TEST(SpeculationController, LookingAroundCostsLittleWhereProposalsLose) {
  // A draft model at 0.1 acceptance, 2 s behind whenever it resumes: after
  // the first climb, retries wait until they cost at most 2 % of the time
  // passed, so a short run loses little to looking (without that rule
  // 200 steps held three retries: 5 % slower than never proposing).
  SpeculationController c(4, true);
  Simulation sim{c, 0.1, [](int, int k) { return 1.0 + 0.5 * k; }};
  sim.outlook = {.backlog_tokens = 40, .remaining_steps = 1000, .relative_cost = 0.3};
  sim.catch_up = 2.0;
  c.caught_up(40, 1, 2.0);
  double tokens = 0, seconds = 0;
  const auto chosen = sim.run(200, 1, &tokens, &seconds);
  EXPECT_LE(chosen.at(1), 4) << "the climb's trial and at most one retry";
  EXPECT_GE(tokens / seconds, 0.96) << "tokens per second against 1.0 without proposals";
}

TEST(SpeculationController, StepsThatFeedPromptsMakeNoTrial) {
  // While prompts are fed beside the decoding sequences (a batch filling
  // up), a step's cost says nothing of the choice: nothing is tried, and
  // once the climb has measured choices the best of them is kept.
  SpeculationController c(4, true);
  Simulation sim{c, 0.8, [](int, int k) { return 1.0 + 0.05 * k; }};
  sim.outlook.prompts_pending = true;
  EXPECT_EQ(sim.run(20, 1).at(0), 20);
  sim.outlook.prompts_pending = false;
  sim.run(20, 1);
  sim.outlook.prompts_pending = true;
  EXPECT_EQ(sim.run(100, 1).at(4), 100);
}

TEST(SpeculationController, ADraftFarBehindIsTriedOnlyWhereItsCatchUpCanPay) {
  // The target fed 1,000 prompt tokens in 10 s and the draft costs 0.3 of
  // it per token: a catch-up of 32 prompts of 100 tokens costs 9.6 s, more
  // than half of what proposals could save in the 60 steps left (at most
  // half of 60 steps of 0.5 s), so the first steps never propose.
  SpeculationController c(4, true);
  c.step_done(10.0, /*decode_only=*/false, 1000);
  Simulation sim{c, 0.9, [](int batch, int k) { return batch == 1 ? 0.05 + 0.01 * k : 0.5 + 0.1 * k; }};
  sim.outlook = {.backlog_tokens = 32 * 100, .remaining_steps = 60, .relative_cost = 0.3};
  EXPECT_EQ(sim.run(60, 32).at(0), 60);
  // Alone, the one prompt's catch-up (0.3 s) is well under that bound
  // (0.5 * 0.5 * 60 * 0.05 s): proposals are tried, and they pay.
  SpeculationController alone(4, true);
  alone.step_done(10.0, false, 1000);
  Simulation one{alone, 0.9, sim.cost};
  one.outlook = {.backlog_tokens = 100, .remaining_steps = 60, .relative_cost = 0.3};
  one.run(20, 1);
  one.outlook = {};  // caught up: later steps have nothing to feed first
  EXPECT_GE(one.run(100, 1)[4], 90);
}

TEST(SpeculationController, ALossAtASmallerBatchKeepsACostlyTrialAway) {
  // Proposals lose alone (each one costs a whole step); at 8 sequences a
  // catch-up costing 10 % of the remaining work is not worth a trial.
  SpeculationController c(4, true);
  Simulation sim{c, 0.8, [](int, int k) { return 1.0 + 1.0 * k; }};
  sim.run(50, 1);  // no backlog: trials cost only their steps
  ASSERT_GT(c.step_seconds(1, 1), 0.0);
  c.step_done(1.0, /*decode_only=*/false, 10);  // 0.1 s a prompt token: the prior
  sim.outlook = {.backlog_tokens = 800, .remaining_steps = 100, .relative_cost = 0.125};
  EXPECT_EQ(sim.run(100, 8).at(0), 100);  // the catch-up: 800 * 0.0125 = 10 s of 100
}

TEST(SpeculationController, AMeasuredCatchUpReplacesTheEstimate) {
  // The estimate from prompt steps forbids the trial; a measured catch-up
  // a hundred times cheaper per token allows it.
  SpeculationController c(4, true);
  c.step_done(10.0, /*decode_only=*/false, 100);
  Simulation sim{c, 0.9, [](int, int k) { return 0.05 + 0.01 * k; }};
  sim.outlook = {.backlog_tokens = 200, .remaining_steps = 50, .relative_cost = 0.5};
  EXPECT_EQ(sim.run(10, 1).at(0), 10);
  c.caught_up(/*tokens=*/1000, /*num_sequences=*/1, /*seconds=*/0.1);
  EXPECT_EQ(sim.run(2, 1), (std::map<int, int>{{1, 2}}));  // now one proposal is tried
  // A step's own few tokens are not a catch-up: were these kept, the climb
  // to two and four proposals would be refused.
  c.caught_up(/*tokens=*/3, /*num_sequences=*/1, /*seconds=*/100.0);
  EXPECT_GT(sim.run(10, 1).size(), 1u);
}

}  // namespace
}  // namespace folio
