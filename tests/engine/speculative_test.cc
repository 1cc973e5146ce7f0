// Speculative decoding without a model: n-gram lookup, the verification rule
// (greedy: the longest agreeing run plus one; sampling: the output
// distribution is the target's, checked by chi-squared), and the scheduler's
// rollback of rejected proposals keeping the KV pool consistent.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "core/error.h"
#include "engine/scheduler.h"
#include "engine/speculative/ngram_proposer.h"
#include "engine/speculative/verifier.h"

namespace folio {
namespace {

TEST(NgramProposer, ProposesWhatFollowedTheLatestEarlierMatch) {
  NgramProposer p(1, 3);
  // ... 7 8 9 | 1 2 ... 7 8 9 | 3 4 5 ... 7 8 9 -> the latest earlier "7 8 9" is followed by 3 4 5.
  std::vector<TokenId> t = {7, 8, 9, 1, 2, 0, 7, 8, 9, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(p.lookup(t, 3), (std::vector<TokenId>{3, 4, 5}));
  EXPECT_EQ(p.lookup(t, 8), (std::vector<TokenId>{3, 4, 5, 6, 7, 8, 9}));  // up to the end of the sequence
  // No 3-gram or 2-gram match: falls back to the last token alone.
  std::vector<TokenId> u = {5, 1, 2, 3, 9, 4, 6, 5};
  EXPECT_EQ(p.lookup(u, 2), (std::vector<TokenId>{1, 2}));
  std::vector<TokenId> none = {1, 2, 3, 4};
  EXPECT_TRUE(p.lookup(none, 4).empty());
  EXPECT_THROW(NgramProposer(0, 2), Error);
}

// Rows of logits for a 5-token vocabulary, one per position.
std::vector<float> rows(std::initializer_list<std::array<float, 5>> r) {
  std::vector<float> out;
  for (const auto& row : r) out.insert(out.end(), row.begin(), row.end());
  return out;
}

TEST(Verifier, GreedyKeepsTheAgreeingRunPlusTheTargetsToken) {
  Sampler sampler;
  SamplingParams greedy;
  greedy.temperature = 0;
  TokenCounts prompt, output;
  SamplingRng rng = SamplingRng::from_seed(1);
  std::vector<float> scratch;
  // Argmaxes per row: 2, 4, 1, 3.
  auto logits = rows({{0, 1, 5, 2, 0}, {0, 0, 1, 2, 9}, {3, 8, 1, 0, 0}, {0, 0, 0, 7, 1}});
  auto check = [&](std::vector<TokenId> draft, std::vector<TokenId> want, int accepted) {
    VerifyResult r = verify_draft(sampler, logits, 5, draft, greedy, prompt, output, rng, scratch);
    std::vector<TokenId> got;
    for (const auto& t : r.emitted) got.push_back(t.token);
    EXPECT_EQ(got, want);
    EXPECT_EQ(r.num_accepted, accepted);
    EXPECT_EQ(output.num_tokens(), 0);  // restored
  };
  check({2, 4, 1}, {2, 4, 1, 3}, 3);  // all accepted: plus the bonus token
  check({2, 4, 0}, {2, 4, 1}, 2);
  check({0, 4, 1}, {2}, 0);
  check({2}, {2, 4}, 1);
  EXPECT_EQ(rng, SamplingRng::from_seed(1));  // greedy draws nothing
}

// The first emitted token and, given an accepted first proposal, the second
// must follow the target's distribution whatever is proposed.
TEST(Verifier, SamplingKeepsTheTargetsDistribution) {
  Sampler sampler;
  SamplingParams params;
  params.temperature = 1.0f;
  TokenCounts prompt, output;
  std::vector<float> scratch;
  const auto logits = rows({{0.0f, 1.0f, 2.0f, 0.5f, -1.0f}, {1.5f, 0.0f, 0.0f, 0.7f, 2.0f}, {0, 0, 0, 0, 0}});
  auto softmax = [](const float* r) {
    std::array<double, 5> p{};
    double z = 0;
    for (int i = 0; i < 5; ++i) z += std::exp(static_cast<double>(r[i]));
    for (int i = 0; i < 5; ++i) p[i] = std::exp(static_cast<double>(r[i])) / z;
    return p;
  };
  const auto p0 = softmax(logits.data()), p1 = softmax(logits.data() + 5);
  for (const std::vector<TokenId>& draft : {std::vector<TokenId>{2, 4}, {4, 0}, {1, 1}}) {
    std::array<double, 5> first{}, second{};
    int second_n = 0;
    const int draws = 100000;
    SamplingRng rng = SamplingRng::from_seed(99);
    for (int i = 0; i < draws; ++i) {
      VerifyResult r = verify_draft(sampler, logits, 5, draft, params, prompt, output, rng, scratch);
      ++first[r.emitted[0].token];
      if (r.num_accepted >= 1) {
        ++second[r.emitted[1].token];
        ++second_n;
      }
    }
    auto chi2 = [](const std::array<double, 5>& counts, const std::array<double, 5>& p, double n) {
      double x = 0;
      for (int i = 0; i < 5; ++i) x += (counts[i] - n * p[i]) * (counts[i] - n * p[i]) / (n * p[i]);
      return x;
    };
    // 4 degrees of freedom: 33.4 is the p = 1e-6 threshold; the seed is fixed, so this is deterministic.
    EXPECT_LT(chi2(first, p0, draws), 33.4) << "draft " << draft[0] << "," << draft[1];
    EXPECT_LT(chi2(second, p1, second_n), 33.4) << "draft " << draft[0] << "," << draft[1];
    EXPECT_NEAR(static_cast<double>(second_n) / draws, p0[static_cast<std::size_t>(draft[0])], 0.01);
  }
}

// Scheduler and KV pool under proposals, random rejections, preemption and
// finishes: every step, KV slots equal computed tokens and the pool adds up.
TEST(SchedulerSpeculation, RollbacksKeepThePoolConsistent) {
  std::mt19937 rng(5);
  for (int round = 0; round < 4; ++round) {
    KvCacheConfig kc;
    kc.num_blocks = 24 + 24 * round;
    KvCacheManager kv(kc);
    SchedulerConfig sc;
    sc.max_num_batched_tokens = 64;
    sc.max_num_seqs = 8;
    sc.max_model_len = 160;
    Scheduler s(sc, kv);
    std::map<SequenceId, int> target_len;
    SequenceId next = 1;
    int proposed = 0, rejected = 0;
    for (int step = 0; step < 2000; ++step) {
      if (target_len.size() < 10 && rng() % 3 == 0) {
        std::vector<TokenId> prompt(static_cast<std::size_t>(4 + rng() % 40));
        for (auto& t : prompt) t = static_cast<TokenId>(rng() % 7);  // repetitive: cache hits
        target_len[next] = static_cast<int>(prompt.size()) + 1 + static_cast<int>(rng() % 60);
        s.add(next++, prompt);
      }
      for (SequenceId id : s.decode_candidates()) {
        std::vector<TokenId> draft(static_cast<std::size_t>(rng() % 6));
        for (auto& t : draft) t = static_cast<TokenId>(rng() % 7);
        if (!draft.empty()) s.propose(id, draft);
      }
      StepPlan plan = s.schedule();
      for (ScheduledSequence& q : plan.sequences) {
        if (q.num_draft_tokens > 0) {
          q.num_rejected = static_cast<int>(rng() % (q.num_draft_tokens + 1));
          proposed += q.num_draft_tokens;
          rejected += q.num_rejected;
        }
      }
      s.complete_step(plan);
      for (const ScheduledSequence& q : plan.sequences) {
        if (!q.sample) continue;
        s.append_token(q.id, static_cast<TokenId>(rng() % 7));
        if (s.find(q.id)->num_tokens() >= target_len[q.id] || rng() % 50 == 0) {
          s.finish(q.id);
          target_len.erase(q.id);
        }
      }
      // Invariants.
      KvUsage u = kv.usage();
      ASSERT_EQ(u.num_free_blocks + u.num_used_blocks, u.num_blocks);
      for (const auto& [id, len] : target_len) {
        const SequenceState* st = s.find(id);
        ASSERT_NE(st, nullptr);
        ASSERT_EQ(st->num_draft_tokens, 0) << "proposals outlive their step";
        if (st->status == SequenceStatus::kRunning) {
          ASSERT_EQ(kv.num_tokens(id), st->num_computed_tokens);
          ASSERT_EQ(kv.num_verified_tokens(id), st->num_computed_tokens);
        } else {
          ASSERT_FALSE(kv.contains(id));
        }
      }
    }
    for (const auto& [id, len] : target_len) s.finish(id);
    EXPECT_EQ(kv.usage().num_used_blocks, 0);
    EXPECT_GT(proposed, 500);
    EXPECT_GT(rejected, 100);
  }
}

}  // namespace
}  // namespace folio
