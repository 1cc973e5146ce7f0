// Scheduler: admission order, the sequence cap, the token budget (decodes
// first, then prefill chunks), chunked and whole prefill, admission on free
// blocks, preemption and recompute, prefix hits, forks, finish in every
// state and the refusals. Each case runs through SchedulerHarness, which
// checks every step, and compares every output with a run alone.
#include "engine/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/scheduler_harness.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::FakeRequest;
using testing::SchedulerHarness;
using testing::solo_output;

SchedulerConfig sched_config(int budget, int max_num_seqs, int max_model_len, bool chunked = true,
                             SchedulingPolicy policy = SchedulingPolicy::kFcfs) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_num_seqs;
  c.max_model_len = max_model_len;
  c.enable_chunked_prefill = chunked;
  c.policy = policy;
  return c;
}

KvCacheConfig kv_config(int num_blocks, int block_size, bool caching = true) {
  KvCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.enable_prefix_caching = caching;
  return c;
}

// n tokens start, start + 1, ...: distinct prompts per start.
std::vector<TokenId> tokens(int n, int start = 1) {
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<TokenId>(start + i));
  return t;
}

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

FakeRequest request(std::vector<TokenId> prompt, int max_new_tokens, int priority = 0) {
  FakeRequest r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.priority = priority;
  return r;
}

std::vector<SequenceId> ids_of(const StepPlan& plan) {
  std::vector<SequenceId> ids;
  for (const ScheduledSequence& q : plan.sequences) ids.push_back(q.id);
  return ids;
}

std::optional<ScheduledSequence> find_in(const StepPlan& plan, SequenceId id) {
  for (const ScheduledSequence& q : plan.sequences)
    if (q.id == id) return q;
  return std::nullopt;
}

// Every finished sequence produced exactly what it produces alone.
void expect_outputs_match_solo(const SchedulerHarness& h, const SchedulerConfig& config, int block_size) {
  for (const auto& [id, f] : h.finished()) {
    std::string error;
    EXPECT_EQ(f.output, solo_output(config, block_size, id, f.request, &error)) << "sequence " << id << " " << error;
    EXPECT_EQ(static_cast<int>(f.output.size()),
              std::min(f.request.max_new_tokens, config.max_model_len - static_cast<int>(f.request.prompt.size())))
        << "sequence " << id;
  }
}

#define ASSERT_HARNESS_OK(h) ASSERT_TRUE((h).error().empty()) << (h).error()

// ---------------------------------------------------------------- admission

TEST(SchedulerTest, FcfsAdmitsInArrivalOrderUpToTheSequenceCap) {
  const SchedulerConfig config = sched_config(64, 2, 64);
  SchedulerHarness h(config, kv_config(32, 4));
  h.add(7, request(tokens(4, 100), 1));
  h.add(3, request(tokens(4, 200), 3));
  h.add(5, request(tokens(4, 300), 3));

  StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_THAT(ids_of(plan), ElementsAre(7, 3));  // arrival order, not id order; 5 is over the cap
  EXPECT_EQ(plan.num_tokens, 8);
  EXPECT_EQ(h.state(5).status, SequenceStatus::kWaiting);
  EXPECT_FALSE(h.kv().contains(5));
  ASSERT_TRUE(h.finished().contains(7));  // one token wanted

  plan = h.step();  // 7's place goes to 5; 3 decodes first
  ASSERT_HARNESS_OK(h);
  ASSERT_EQ(plan.sequences.size(), 2u);
  EXPECT_EQ(plan.sequences[0].id, 3u);
  EXPECT_EQ(plan.sequences[0].num_new_tokens, 1);
  EXPECT_EQ(plan.sequences[1].id, 5u);
  EXPECT_EQ(plan.sequences[1].num_new_tokens, 4);
  ASSERT_TRUE(h.run(100)) << h.error();
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

class SchedulerCapTest : public ::testing::TestWithParam<int> {};

TEST_P(SchedulerCapTest, PlansNeverRunMoreThanTheCap) {
  const int cap = GetParam();
  const SchedulerConfig config = sched_config(256, cap, 64);
  SchedulerHarness h(config, kv_config(64, 4));
  for (int i = 0; i < 8; ++i) h.add(static_cast<SequenceId>(i + 1), request(tokens(3 + i, 10 * i), 2 + i % 3));
  std::size_t widest = 0;
  while (h.scheduler().has_work()) {
    const StepPlan plan = h.step();
    ASSERT_HARNESS_OK(h);
    ASSERT_LE(static_cast<int>(plan.sequences.size()), cap);
    ASSERT_LE(h.scheduler().num_running(), cap);
    widest = std::max(widest, plan.sequences.size());
    ASSERT_LT(h.num_steps(), 200);
  }
  EXPECT_EQ(static_cast<int>(widest), cap);
  EXPECT_EQ(h.finished().size(), 8u);
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerCapTest, ::testing::Values(1, 2, 5, 8));

// -------------------------------------------------------------- token budget

struct BudgetCase {
  int num_decoding;  // sequences already decoding
  int prompt_len;    // the newcomer's prompt
  int budget;
  int want_chunk;    // the newcomer's first chunk; 0: not admitted
};

void PrintTo(const BudgetCase& c, std::ostream* os) {
  *os << c.num_decoding << " decoding, prompt " << c.prompt_len << ", budget " << c.budget;
}

class SchedulerBudgetTest : public ::testing::TestWithParam<BudgetCase> {};

TEST_P(SchedulerBudgetTest, DecodesFirstThenAPrefillChunk) {
  const BudgetCase& c = GetParam();
  const SchedulerConfig config = sched_config(c.budget, 32, 128);
  SchedulerHarness h(config, kv_config(256, 4));
  for (int i = 0; i < c.num_decoding; ++i) h.add(static_cast<SequenceId>(i + 1), request(tokens(2, 10 * i), 100));
  auto all_decoding = [&] {
    for (int i = 0; i < c.num_decoding; ++i)
      if (h.state(static_cast<SequenceId>(i + 1)).num_output_tokens() == 0) return false;
    return true;
  };
  while (!all_decoding()) {
    h.step();
    ASSERT_HARNESS_OK(h);
  }
  const SequenceId newcomer = 1000;
  h.add(newcomer, request(tokens(c.prompt_len, 500), 2));
  const StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);

  ASSERT_EQ(static_cast<int>(plan.sequences.size()), c.num_decoding + (c.want_chunk > 0 ? 1 : 0));
  for (int i = 0; i < c.num_decoding; ++i) {
    EXPECT_EQ(plan.sequences[static_cast<std::size_t>(i)].id, static_cast<SequenceId>(i + 1));
    EXPECT_EQ(plan.sequences[static_cast<std::size_t>(i)].num_new_tokens, 1);
    EXPECT_TRUE(plan.sequences[static_cast<std::size_t>(i)].sample);
  }
  if (c.want_chunk > 0) {
    const ScheduledSequence& q = plan.sequences.back();
    EXPECT_EQ(q.id, newcomer);
    EXPECT_EQ(q.num_computed_tokens, 0);
    EXPECT_EQ(q.num_new_tokens, c.want_chunk);
    EXPECT_EQ(q.sample, c.want_chunk == c.prompt_len);
  } else {
    EXPECT_EQ(h.state(newcomer).status, SequenceStatus::kWaiting);
  }
  EXPECT_EQ(plan.num_tokens, c.num_decoding + c.want_chunk);
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerBudgetTest,
                         ::testing::Values(BudgetCase{3, 40, 16, 13}, BudgetCase{0, 40, 16, 16},
                                           BudgetCase{5, 3, 16, 3}, BudgetCase{15, 40, 16, 1},
                                           BudgetCase{16, 40, 16, 0}, BudgetCase{4, 12, 16, 12},
                                           BudgetCase{8, 100, 512, 100}));

// ----------------------------------------------------------- chunked prefill

struct ChunkCase {
  std::string name;
  int prompt_len;
  int budget;
  int block_size;
  std::vector<int> want_chunks;
};

void PrintTo(const ChunkCase& c, std::ostream* os) { *os << c.name; }

class SchedulerChunkTest : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(SchedulerChunkTest, SplitsTheBudgetAndSamplesOnlyOnTheLastChunk) {
  const ChunkCase& c = GetParam();
  const SchedulerConfig config = sched_config(c.budget, 4, 128);
  SchedulerHarness h(config, kv_config(128 / c.block_size, c.block_size));
  h.add(1, request(tokens(c.prompt_len), 3));
  std::vector<int> chunks;
  int fed = 0;
  while (chunks.empty() || fed < c.prompt_len) {
    const StepPlan plan = h.step();
    ASSERT_HARNESS_OK(h);
    ASSERT_EQ(plan.sequences.size(), 1u);
    const ScheduledSequence& q = plan.sequences[0];
    EXPECT_EQ(q.num_computed_tokens, fed);
    fed += q.num_new_tokens;
    chunks.push_back(q.num_new_tokens);
    EXPECT_EQ(q.sample, fed == c.prompt_len) << "after " << fed << " tokens";
    // Slots for exactly the tokens fed: no block taken ahead of need.
    EXPECT_EQ(h.kv().num_tokens(1), fed);
    EXPECT_EQ(h.kv().block_table(1).num_blocks(), BlockTable::blocks_for(fed, c.block_size));
    // Every full block of the prompt is committed as soon as it is written.
    EXPECT_EQ(h.kv().usage().num_cached_blocks, fed / c.block_size);
    EXPECT_EQ(h.state(1).num_output_tokens(), fed == c.prompt_len ? 1 : 0);
  }
  EXPECT_EQ(chunks, c.want_chunks);
  ASSERT_TRUE(h.run(100)) << h.error();
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, c.block_size);
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerChunkTest,
    ::testing::Values(ChunkCase{"Uneven", 40, 16, 4, {16, 16, 8}},
                      // Regression: every chunk boundary falls on a block edge.
                      ChunkCase{"RegressionBoundariesOnBlockEdges", 64, 16, 16, {16, 16, 16, 16}},
                      ChunkCase{"OneTokenPastABlockEdge", 33, 16, 16, {16, 16, 1}},
                      ChunkCase{"TwoBlocksPerChunk", 96, 32, 16, {32, 32, 32}},
                      ChunkCase{"BudgetNotABlockMultiple", 30, 7, 4, {7, 7, 7, 7, 2}},
                      ChunkCase{"ExactlyTheBudget", 16, 16, 16, {16}},
                      ChunkCase{"ShortPrompt", 5, 16, 4, {5}},
                      ChunkCase{"BlockSizeOne", 10, 3, 1, {3, 3, 3, 1}}),
    [](const auto& row) { return row.param.name; });

// Regression: a prompt whose length is a multiple of the block size, fully
// cached, is served one block short so that its last token is fed again (in
// a fresh block, the cached one stays shared and read-only) and has logits.
TEST(SchedulerTest, RegressionWholePromptCachedOnBlockEdge) {
  const SchedulerConfig config = sched_config(16, 4, 128);
  SchedulerHarness h(config, kv_config(32, 16));
  const std::vector<TokenId> prompt = tokens(64);
  h.add(1, request(prompt, 2));
  ASSERT_TRUE(h.run(20)) << h.error();
  ASSERT_EQ(h.kv().usage().num_cached_free_blocks, 4);

  h.add(2, request(prompt, 3));                            // the same 64 tokens
  h.add(3, request(concat(tokens(48), tokens(5, 900)), 3));  // 3 blocks shared, then its own
  StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  auto q2 = find_in(plan, 2);
  ASSERT_TRUE(q2.has_value());
  EXPECT_EQ(q2->num_computed_tokens, 48);
  EXPECT_EQ(q2->num_new_tokens, 16);
  EXPECT_TRUE(q2->sample);
  EXPECT_EQ(h.state(2).num_cached_tokens, 48);
  // Its last block is its own: written again, and not cached twice.
  EXPECT_EQ(h.kv().pool().ref_count(h.kv().block_table(2)[3]), 1);
  EXPECT_FALSE(h.kv().pool().cache().is_cached(h.kv().block_table(2)[3]));
  EXPECT_EQ(h.kv().usage().num_cached_blocks, 4);
  EXPECT_FALSE(find_in(plan, 3).has_value());  // the budget is spent
  plan = h.step();
  ASSERT_HARNESS_OK(h);
  auto q3 = find_in(plan, 3);
  ASSERT_TRUE(q3.has_value());
  EXPECT_EQ(q3->num_computed_tokens, 48);
  EXPECT_EQ(q3->num_new_tokens, 5);
  // Both hit the same cached blocks.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(h.kv().block_table(2)[i], h.kv().block_table(3)[i]);
  ASSERT_TRUE(h.run(50)) << h.error();
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 16);
}

TEST(SchedulerTest, WithoutChunkedPrefillOnlyWholePromptsAreFed) {
  const SchedulerConfig config = sched_config(64, 8, 64, /*chunked=*/false);
  SchedulerHarness h(config, kv_config(64, 4));
  h.add(1, request(tokens(30, 100), 4));
  h.add(2, request(tokens(30, 200), 4));
  h.add(3, request(tokens(30, 300), 4));
  h.add(4, request(tokens(2, 400), 4));  // would fit, but waits behind 3 (FCFS)

  StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_THAT(ids_of(plan), ElementsAre(1, 2));
  EXPECT_EQ(plan.num_tokens, 60);  // 4 tokens of budget left, not enough for 3's 30
  EXPECT_EQ(h.state(3).status, SequenceStatus::kWaiting);
  EXPECT_EQ(h.state(4).status, SequenceStatus::kWaiting);

  plan = h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_THAT(ids_of(plan), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(plan.num_tokens, 1 + 1 + 30 + 2);
  ASSERT_TRUE(h.run(100)) << h.error();
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

// ------------------------------------------------------------ blocks and pool

TEST(SchedulerTest, AdmissionWaitsForBlocksUntilAFinishFreesThem) {
  const SchedulerConfig config = sched_config(64, 8, 32);
  SchedulerHarness h(config, kv_config(8, 4, /*caching=*/false));
  h.add(1, request(tokens(20, 100), 3));  // 5 blocks, 6 once decoding
  h.add(2, request(tokens(14, 200), 2));  // 4 blocks: do not fit beside 1

  for (int step = 1; step <= 3; ++step) {
    const StepPlan plan = h.step();
    ASSERT_HARNESS_OK(h);
    EXPECT_THAT(ids_of(plan), ElementsAre(1)) << "step " << step;
    EXPECT_EQ(h.state(2).status, SequenceStatus::kWaiting);
    EXPECT_FALSE(h.kv().contains(2));
  }
  ASSERT_TRUE(h.finished().contains(1));
  EXPECT_EQ(h.kv().usage().num_used_blocks, 0);
  const StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_THAT(ids_of(plan), ElementsAre(2));
  EXPECT_EQ(plan.sequences[0].num_new_tokens, 14);
  EXPECT_EQ(h.scheduler().num_preemptions(), 0);
  ASSERT_TRUE(h.run(20)) << h.error();
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

struct PreemptionCase {
  std::string name;
  SchedulingPolicy policy;
  std::vector<int> priorities;  // of sequences 1, 2, 3 (added in that order)
  SequenceId want_first_victim;
  SequenceId want_never_preempted;
};

void PrintTo(const PreemptionCase& c, std::ostream* os) { *os << c.name; }

class SchedulerPreemptionTest : public ::testing::TestWithParam<PreemptionCase> {};

TEST_P(SchedulerPreemptionTest, PicksTheVictimByPolicyAndRecomputesItExactly) {
  const PreemptionCase& c = GetParam();
  const SchedulerConfig config = sched_config(64, 8, 48, true, c.policy);
  SchedulerHarness h(config, kv_config(12, 4, /*caching=*/false));
  for (int i = 0; i < 3; ++i)
    h.add(static_cast<SequenceId>(i + 1), request(tokens(12, 100 * (i + 1)), 20, c.priorities[static_cast<std::size_t>(i)]));
  StepPlan plan = h.step();  // all three fit: 9 of 12 blocks
  ASSERT_HARNESS_OK(h);
  ASSERT_EQ(plan.sequences.size(), 3u);
  std::vector<SequenceId> victims;
  while (h.scheduler().has_work()) {
    plan = h.step();
    ASSERT_HARNESS_OK(h);
    victims.insert(victims.end(), plan.preempted.begin(), plan.preempted.end());
    for (SequenceId v : plan.preempted) {
      EXPECT_FALSE(find_in(plan, v).has_value());
      EXPECT_FALSE(h.kv().contains(v));
    }
    ASSERT_LT(h.num_steps(), 500);
  }
  ASSERT_FALSE(victims.empty());
  EXPECT_EQ(victims.front(), c.want_first_victim);
  EXPECT_EQ(std::count(victims.begin(), victims.end(), c.want_never_preempted), 0);
  EXPECT_GE(h.finished().at(c.want_first_victim).num_preemptions, 1);
  EXPECT_EQ(h.finished().at(c.want_never_preempted).num_preemptions, 0);
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);  // recompute changed no token
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerPreemptionTest,
    ::testing::Values(PreemptionCase{"FcfsNewestFirst", SchedulingPolicy::kFcfs, {0, 0, 0}, 3, 1},
                      // Priority ignores that 1 came first: it has the lowest priority.
                      PreemptionCase{"PriorityLowestFirst", SchedulingPolicy::kPriority, {2, 0, 1}, 1, 2},
                      PreemptionCase{"PriorityTiesNewestFirst", SchedulingPolicy::kPriority, {0, 1, 1}, 3, 1}),
    [](const auto& row) { return row.param.name; });

// Regression: a request admitted on a prefix hit (reviving cached free
// blocks) is preempted in the very next step. Its blocks go back as cached
// hits, the pool stays consistent, and its recompute hits the cache again.
TEST(SchedulerTest, RegressionPreemptionRightAfterAPrefixHit) {
  const SchedulerConfig config = sched_config(64, 8, 36);
  SchedulerHarness h(config, kv_config(9, 4));
  const std::vector<TokenId> shared = tokens(16, 500);
  h.add(1, request(shared, 1));  // warms the cache: 4 full blocks, then free
  ASSERT_TRUE(h.run(10)) << h.error();
  ASSERT_EQ(h.kv().usage().num_cached_free_blocks, 4);

  h.add(2, request(tokens(12, 100), 4));           // 3 blocks, needs a 4th on its first decode
  h.add(3, request(concat(shared, tokens(4, 900)), 3));  // hit 16 + 4 tokens: 5 blocks, a 6th on decode
  StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  auto q3 = find_in(plan, 3);
  ASSERT_TRUE(q3.has_value());
  EXPECT_EQ(q3->num_computed_tokens, 16);
  EXPECT_EQ(q3->num_new_tokens, 4);
  EXPECT_EQ(h.state(3).num_cached_tokens, 16);
  EXPECT_EQ(h.kv().usage().num_free_blocks, 1);

  plan = h.step();  // 2 takes the last block; 3 is dry and newest: preempted
  ASSERT_HARNESS_OK(h);
  EXPECT_THAT(plan.preempted, ElementsAre(3));
  EXPECT_THAT(ids_of(plan), ElementsAre(2));
  EXPECT_EQ(h.state(3).status, SequenceStatus::kWaiting);
  // Its five full blocks (4 hits + the one it computed) are cached hits again.
  EXPECT_EQ(h.kv().usage().num_cached_free_blocks, 5);

  bool recomputed = false;
  while (h.scheduler().has_work()) {
    plan = h.step();
    ASSERT_HARNESS_OK(h);
    if (auto q = find_in(plan, 3)) {
      if (!recomputed) {
        recomputed = true;
        EXPECT_EQ(q->num_computed_tokens, 20);  // 21 tokens now: hits all 5 full blocks
        EXPECT_EQ(q->num_new_tokens, 1);
      }
    }
    ASSERT_LT(h.num_steps(), 100);
  }
  EXPECT_TRUE(recomputed);
  EXPECT_EQ(h.finished().at(3).num_cached_tokens, 16);  // counted at the first admission only
  EXPECT_EQ(h.finished().at(3).num_preemptions, 1);
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

// A request whose hit blocks are shared with a running one is preempted the
// step after its admission: the owner keeps them (ref count back to 1) and
// keeps reading the right KV.
TEST(SchedulerTest, RegressionPreemptingAPrefixSharerLeavesTheOwnerIntact) {
  const SchedulerConfig config = sched_config(64, 8, 36);
  SchedulerHarness h(config, kv_config(9, 4));
  const std::vector<TokenId> shared = tokens(16, 500);
  h.add(1, request(concat(shared, tokens(2, 50)), 16));  // 18 tokens: 5 blocks, 9 (all) at the end
  StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  const std::vector<BlockId> owner_blocks = h.kv().block_table(1).blocks();

  h.add(2, request(concat(shared, tokens(3, 900)), 12));  // 4 shared + 1 own block
  plan = h.step();
  ASSERT_HARNESS_OK(h);
  ASSERT_TRUE(find_in(plan, 2).has_value());
  EXPECT_EQ(find_in(plan, 2)->num_computed_tokens, 16);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h.kv().pool().ref_count(owner_blocks[static_cast<std::size_t>(i)]), 2);
  EXPECT_EQ(h.kv().usage().num_free_blocks, 3);

  // 1 grows into new blocks; 2 (newest) is preempted once the pool is dry.
  std::vector<SequenceId> victims;
  while (victims.empty()) {
    plan = h.step();
    ASSERT_HARNESS_OK(h);
    victims = plan.preempted;
    ASSERT_LT(h.num_steps(), 30);
  }
  EXPECT_THAT(victims, ElementsAre(2));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h.kv().pool().ref_count(owner_blocks[static_cast<std::size_t>(i)]), 1);
  ASSERT_TRUE(h.run(100)) << h.error();
  EXPECT_EQ(h.finished().at(1).num_preemptions, 0);
  EXPECT_EQ(h.finished().at(2).num_preemptions, 1);
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

// -------------------------------------------------------------- prefix hits

struct HitCase {
  std::string name;
  int prompt_len;
  int shared_len;  // leading tokens equal to the cached prompt's
  int block_size;
  bool caching;
  int want_hit;
};

void PrintTo(const HitCase& c, std::ostream* os) { *os << c.name; }

class SchedulerPrefixHitTest : public ::testing::TestWithParam<HitCase> {};

TEST_P(SchedulerPrefixHitTest, CachedBlocksAreNotFedAgain) {
  const HitCase& c = GetParam();
  const SchedulerConfig config = sched_config(64, 8, 128);
  SchedulerHarness h(config, kv_config(64, c.block_size, c.caching));
  const std::vector<TokenId> base = tokens(c.prompt_len, 1);
  h.add(1, request(base, 2));
  ASSERT_TRUE(h.run(20)) << h.error();

  std::vector<TokenId> prompt(base.begin(), base.begin() + c.shared_len);
  prompt = concat(prompt, tokens(c.prompt_len - c.shared_len, 7000));
  h.add(2, request(prompt, 3));
  const StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  ASSERT_EQ(plan.sequences.size(), 1u);
  EXPECT_EQ(plan.sequences[0].num_computed_tokens, c.want_hit);
  EXPECT_EQ(plan.sequences[0].num_new_tokens, c.prompt_len - c.want_hit);
  EXPECT_EQ(plan.num_tokens, c.prompt_len - c.want_hit);
  EXPECT_EQ(h.state(2).num_cached_tokens, c.want_hit);
  ASSERT_TRUE(h.run(20)) << h.error();
  EXPECT_EQ(h.finished().at(2).num_cached_tokens, c.want_hit);
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, c.block_size);
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerPrefixHitTest,
                         ::testing::Values(HitCase{"TwoFullBlocks", 40, 40, 16, true, 32},
                                           HitCase{"WholePromptOnBlockEdge", 32, 32, 16, true, 16},
                                           HitCase{"OnePastABlockEdge", 33, 33, 16, true, 32},
                                           HitCase{"SharedPartOnly", 40, 20, 16, true, 16},
                                           HitCase{"SharedLessThanABlock", 40, 15, 16, true, 0},
                                           HitCase{"CachingOff", 40, 40, 16, false, 0},
                                           HitCase{"SmallBlocks", 9, 9, 4, true, 8},
                                           HitCase{"SmallBlocksOnEdge", 8, 8, 4, true, 4}),
                         [](const auto& row) { return row.param.name; });

// A cache salt separates tenants: the same prompt under another salt misses.
TEST(SchedulerTest, PrefixHitsStayWithinTheirCacheSalt) {
  const SchedulerConfig config = sched_config(64, 8, 128);
  SchedulerHarness h(config, kv_config(64, 4));
  FakeRequest a = request(tokens(20), 2);
  a.salt = "tenant-a";
  h.add(1, a);
  ASSERT_TRUE(h.run(20)) << h.error();
  FakeRequest b = a;
  b.salt = "tenant-b";
  h.add(2, b);
  h.add(3, a);
  const StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_EQ(find_in(plan, 2)->num_computed_tokens, 0);
  EXPECT_EQ(find_in(plan, 3)->num_computed_tokens, 16);
  ASSERT_TRUE(h.run(20)) << h.error();
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

// -------------------------------------------------------------------- forks

struct ForkCase {
  std::string name;
  int prompt_len;
  int num_children;
  bool want_copies;  // the prompt ends inside a block
};

void PrintTo(const ForkCase& c, std::ostream* os) { *os << c.name; }

class SchedulerForkTest : public ::testing::TestWithParam<ForkCase> {};

TEST_P(SchedulerForkTest, ChildrenShareThePromptAndGetCopiesInTheNextPlan) {
  const ForkCase& c = GetParam();
  const SchedulerConfig config = sched_config(64, 8, 64);
  SchedulerHarness h(config, kv_config(32, 4));
  FakeRequest parent = request(tokens(c.prompt_len), 5);
  for (int i = 0; i < c.num_children; ++i) parent.children.push_back(static_cast<SequenceId>(101 + i));
  h.add(1, parent);
  StepPlan plan = h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_TRUE(plan.block_copies.empty());

  const std::vector<BlockId>& parent_blocks = h.kv().block_table(1).blocks();
  std::vector<BlockCopy> want;
  for (int i = 0; i < c.num_children; ++i) {
    const SequenceId child = static_cast<SequenceId>(101 + i);
    ASSERT_EQ(h.state(child).status, SequenceStatus::kRunning);
    EXPECT_EQ(h.state(child).num_computed_tokens, c.prompt_len);
    EXPECT_EQ(h.state(child).num_output_tokens(), 1);
    const std::vector<BlockId>& blocks = h.kv().block_table(child).blocks();
    ASSERT_EQ(blocks.size(), parent_blocks.size());
    const int num_full = c.prompt_len / 4;
    for (int b = 0; b < num_full; ++b)
      EXPECT_EQ(blocks[static_cast<std::size_t>(b)], parent_blocks[static_cast<std::size_t>(b)]);
    if (c.want_copies) want.push_back({parent_blocks.back(), blocks.back()});
  }
  plan = h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_EQ(plan.block_copies, want);
  EXPECT_EQ(static_cast<int>(plan.sequences.size()), 1 + c.num_children);  // all decode together
  ASSERT_TRUE(h.run(50)) << h.error();
  ASSERT_TRUE(h.drained()) << h.error();
  ASSERT_EQ(static_cast<int>(h.finished().size()), 1 + c.num_children);
  expect_outputs_match_solo(h, config, 4);
  // Own seeds, own streams.
  EXPECT_NE(h.finished().at(1).output, h.finished().at(101).output);
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerForkTest,
                         ::testing::Values(ForkCase{"PartialLastBlock", 10, 2, true},
                                           ForkCase{"PromptOnBlockEdge", 12, 3, false},
                                           ForkCase{"OneBlockPrompt", 3, 1, true}),
                         [](const auto& row) { return row.param.name; });

struct ForkFallbackCase {
  std::string name;
  int num_blocks;
  int max_num_seqs;
};

void PrintTo(const ForkFallbackCase& c, std::ostream* os) { *os << c.name; }

class SchedulerForkFallbackTest : public ::testing::TestWithParam<ForkFallbackCase> {};

TEST_P(SchedulerForkFallbackTest, ChildQueuesAndRecomputesFromTheCache) {
  const ForkFallbackCase& c = GetParam();
  const SchedulerConfig config = sched_config(64, c.max_num_seqs, 12);
  SchedulerHarness h(config, kv_config(c.num_blocks, 4));
  FakeRequest parent = request(tokens(10), 2);  // 3 blocks, the last partial
  parent.children = {101};
  h.add(1, parent);
  h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_EQ(h.num_fork_fallbacks(), 1);
  EXPECT_EQ(h.state(101).status, SequenceStatus::kWaiting);
  EXPECT_FALSE(h.kv().contains(101));
  EXPECT_LE(h.scheduler().num_running(), c.max_num_seqs);

  bool admitted = false;
  while (h.scheduler().has_work()) {
    const StepPlan plan = h.step();
    ASSERT_HARNESS_OK(h);
    EXPECT_TRUE(plan.block_copies.empty());
    if (auto q = find_in(plan, 101); q && !admitted) {
      admitted = true;
      EXPECT_EQ(q->num_computed_tokens, 8);  // the parent's two full blocks
      EXPECT_EQ(q->num_new_tokens, 2);
    }
    ASSERT_LT(h.num_steps(), 50);
  }
  EXPECT_TRUE(admitted);
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerForkFallbackTest,
                         ::testing::Values(ForkFallbackCase{"NoBlockForTheCopy", 3, 8},
                                           // Regression: a fork once ran past max_num_seqs.
                                           ForkFallbackCase{"SequenceCapReached", 16, 1}),
                         [](const auto& row) { return row.param.name; });

TEST(SchedulerTest, ForkRefusesWhatIsNotAFreshlyPrefilledParent) {
  SchedulerHarness h(sched_config(64, 8, 64), kv_config(32, 4));
  h.add(1, request(tokens(10), 5));
  h.add(2, request(tokens(10, 50), 5));
  EXPECT_THROW(h.scheduler().fork(1, 9), Error);  // waiting
  h.step();
  ASSERT_HARNESS_OK(h);
  EXPECT_THROW(h.scheduler().fork(1, 9), Error);   // has an output token
  EXPECT_THROW(h.scheduler().fork(77, 9), Error);  // unknown
  EXPECT_THROW(h.scheduler().fork(1, 2), Error);   // the child id is taken
  EXPECT_EQ(h.scheduler().find(9), nullptr);
  ASSERT_TRUE(h.check()) << h.error();
}

// ------------------------------------------------------- finish in any state

enum class Moment { kBetweenSteps, kDuringStep };

struct FinishCase {
  std::string name;
  Moment moment;
  // Picks the sequence to end now, or 0.
  std::function<SequenceId(SchedulerHarness&, const StepPlan*)> pick;
};

void PrintTo(const FinishCase& c, std::ostream* os) { *os << c.name; }

SequenceId first_alive(SchedulerHarness& h, const std::function<bool(const SequenceState&)>& pred) {
  for (SequenceId id : h.alive_ids())
    if (pred(h.state(id))) return id;
  return 0;
}

class SchedulerFinishTest : public ::testing::TestWithParam<FinishCase> {};

TEST_P(SchedulerFinishTest, ReturnsEveryBlock) {
  const FinishCase& c = GetParam();
  const SchedulerConfig config = sched_config(12, 4, 40);
  SchedulerHarness h(config, kv_config(10, 4));
  h.add(1, request(tokens(8, 100), 24));
  h.add(2, request(tokens(14, 200), 20));
  h.add(3, request(tokens(6, 300), 20));
  h.add(4, request(concat(tokens(8, 100), tokens(3, 400)), 5));  // shares 1's first two blocks
  FakeRequest parent = request(tokens(6, 500), 6);
  parent.children = {6};
  h.add(5, parent);

  SequenceId victim = 0;
  int used_after = -1;
  auto end_it = [&](SequenceId id) {
    victim = id;
    int exclusive = 0;
    if (h.kv().contains(id))
      for (BlockId b : h.kv().block_table(id).blocks()) exclusive += h.kv().pool().ref_count(b) == 1;
    used_after = h.kv().usage().num_used_blocks - exclusive;
    h.abort(id);
    EXPECT_EQ(h.kv().usage().num_used_blocks, used_after);
    EXPECT_FALSE(h.kv().contains(id));
    EXPECT_EQ(h.scheduler().find(id), nullptr);
    EXPECT_FALSE(h.scheduler().finish(id));  // already gone
  };
  while (victim == 0 && h.scheduler().has_work()) {
    if (c.moment == Moment::kBetweenSteps) {
      if (SequenceId id = c.pick(h, nullptr)) {
        end_it(id);
        ASSERT_TRUE(h.check()) << h.error();
        break;
      }
    }
    h.step([&](const StepPlan& plan) {
      if (c.moment == Moment::kDuringStep && victim == 0)
        if (SequenceId id = c.pick(h, &plan)) end_it(id);
    });
    ASSERT_HARNESS_OK(h);
    ASSERT_LT(h.num_steps(), 300);
  }
  ASSERT_NE(victim, 0u) << "never reached the state";
  ASSERT_TRUE(h.run(500)) << h.error();
  ASSERT_TRUE(h.drained()) << h.error();
  EXPECT_FALSE(h.finished().contains(victim));
  expect_outputs_match_solo(h, config, 4);
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerFinishTest,
    ::testing::Values(
        FinishCase{"WaitingNeverAdmitted", Moment::kBetweenSteps,
                   [](SchedulerHarness& h, const StepPlan*) {
                     return first_alive(h, [](const SequenceState& s) {
                       return s.status == SequenceStatus::kWaiting && s.num_cached_tokens < 0;
                     });
                   }},
        FinishCase{"MidPrefill", Moment::kBetweenSteps,
                   [](SchedulerHarness& h, const StepPlan*) {
                     return first_alive(h, [](const SequenceState& s) {
                       return s.status == SequenceStatus::kRunning && s.num_computed_tokens > 0 &&
                              s.num_computed_tokens < s.num_prompt_tokens;
                     });
                   }},
        FinishCase{"Decoding", Moment::kBetweenSteps,
                   [](SchedulerHarness& h, const StepPlan*) {
                     return first_alive(h, [](const SequenceState& s) {
                       return s.status == SequenceStatus::kRunning && s.num_output_tokens() >= 2;
                     });
                   }},
        FinishCase{"SharingAPrefixHit", Moment::kBetweenSteps,
                   [](SchedulerHarness& h, const StepPlan*) -> SequenceId {
                     return h.alive(4) && h.state(4).status == SequenceStatus::kRunning &&
                                    h.state(4).num_cached_tokens > 0 &&
                                    h.kv().pool().ref_count(h.kv().block_table(4)[0]) > 1
                                ? 4
                                : 0;
                   }},
        FinishCase{"PreemptedAndWaiting", Moment::kBetweenSteps,
                   [](SchedulerHarness& h, const StepPlan*) {
                     return first_alive(h, [](const SequenceState& s) {
                       return s.status == SequenceStatus::kWaiting && s.num_preemptions > 0;
                     });
                   }},
        FinishCase{"JustPreempted", Moment::kDuringStep,
                   [](SchedulerHarness&, const StepPlan* plan) -> SequenceId {
                     return plan->preempted.empty() ? 0 : plan->preempted.front();
                   }},
        FinishCase{"WhileItsStepRuns", Moment::kDuringStep,
                   [](SchedulerHarness&, const StepPlan* plan) -> SequenceId {
                     return plan->sequences.size() < 2 ? 0 : plan->sequences[1].id;
                   }},
        FinishCase{"ForkChildBeforeItsCopy", Moment::kBetweenSteps,
                   [](SchedulerHarness& h, const StepPlan*) -> SequenceId {
                     return h.alive(6) && h.state(6).status == SequenceStatus::kRunning &&
                                    h.state(6).num_computed_tokens == h.state(6).num_prompt_tokens
                                ? 6
                                : 0;
                   }},
        FinishCase{"ForkParent", Moment::kBetweenSteps,
                   [](SchedulerHarness& h, const StepPlan*) -> SequenceId {
                     return h.alive(5) && h.alive(6) && h.state(5).status == SequenceStatus::kRunning ? 5 : 0;
                   }}),
    [](const auto& row) { return row.param.name; });

// ---------------------------------------------------------------- refusals

struct AddErrorCase {
  std::string name;
  int prompt_len;
  std::string want;
};

void PrintTo(const AddErrorCase& c, std::ostream* os) { *os << c.name; }

class SchedulerAddErrorTest : public ::testing::TestWithParam<AddErrorCase> {};

TEST_P(SchedulerAddErrorTest, RefusesWhatCanNeverRun) {
  const AddErrorCase& c = GetParam();
  KvCacheManager kv(kv_config(8, 4));
  Scheduler s(sched_config(64, 8, 32), kv);
  s.add(1, tokens(5));
  try {
    s.add(c.name == "DuplicateId" ? 1 : 2, tokens(c.prompt_len));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(c.want));
  }
  EXPECT_EQ(s.num_waiting(), 1);
  EXPECT_EQ(s.find(2), nullptr);
  EXPECT_EQ(kv.usage().num_used_blocks, 0);
}

// No prompt can be larger than the pool once the constructor has checked
// that the pool holds max_model_len tokens: LargestPromptFillsTheExactPool
// runs the largest one instead.
INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerAddErrorTest,
                         ::testing::Values(AddErrorCase{"Empty", 0, "the prompt is empty"},
                                           AddErrorCase{"AtMaxModelLen", 32, "the prompt has 32 tokens but the context holds 32"},
                                           AddErrorCase{"OverMaxModelLen", 40, "the prompt has 40 tokens"},
                                           AddErrorCase{"DuplicateId", 3, "sequence 1 already exists"}),
                         [](const auto& row) { return row.param.name; });

TEST(SchedulerTest, LargestPromptFillsTheExactPool) {
  const SchedulerConfig config = sched_config(16, 4, 32);
  SchedulerHarness h(config, kv_config(8, 4));  // exactly 32 tokens
  h.add(1, request(tokens(31), 10));
  ASSERT_TRUE(h.run(10)) << h.error();
  ASSERT_EQ(h.finished().at(1).output.size(), 1u);  // stopped at max_model_len
  ASSERT_TRUE(h.drained()) << h.error();
  expect_outputs_match_solo(h, config, 4);
}

struct ConfigErrorCase {
  std::string name;
  SchedulerConfig config;
  int num_blocks;
  std::string want;  // "" : accepted
};

void PrintTo(const ConfigErrorCase& c, std::ostream* os) { *os << c.name; }

class SchedulerConfigErrorTest : public ::testing::TestWithParam<ConfigErrorCase> {};

TEST_P(SchedulerConfigErrorTest, RefusesConfigsThatCannotServe) {
  const ConfigErrorCase& c = GetParam();
  KvCacheManager kv(kv_config(c.num_blocks, 4));
  if (c.want.empty()) {
    EXPECT_NO_THROW(Scheduler(c.config, kv));
    return;
  }
  try {
    Scheduler s(c.config, kv);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(c.want));
  }
}

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerConfigErrorTest,
    ::testing::Values(
        ConfigErrorCase{"PoolSmallerThanMaxModelLen", sched_config(64, 8, 32), 7,
                        "the KV cache holds 28 tokens, fewer than one sequence of max_model_len 32"},
        ConfigErrorCase{"PoolExactlyMaxModelLen", sched_config(64, 8, 32), 8, ""},
        ConfigErrorCase{"ZeroBudget", sched_config(0, 8, 32), 8, "must be positive"},
        ConfigErrorCase{"ZeroSequences", sched_config(64, 0, 32), 8, "must be positive"},
        ConfigErrorCase{"ZeroMaxModelLen", sched_config(64, 8, 0), 8, "must be positive"},
        ConfigErrorCase{"NoChunkingBudgetBelowMaxModelLen", sched_config(16, 8, 32, false), 8,
                        "without chunked prefill"},
        ConfigErrorCase{"NoChunkingBudgetAtMaxModelLen", sched_config(32, 8, 32, false), 8, ""}),
    [](const auto& row) { return row.param.name; });

}  // namespace
}  // namespace folio
