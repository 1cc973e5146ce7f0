// A randomized engine loop over the Scheduler: arrivals with shared prefixes
// and tenant salts, random prompt and output lengths, priorities, forks,
// aborts in every state, under pools from exact-fit to ample, budgets from
// 16 to 512 and caps from 1 to 64. SchedulerHarness checks every step; at the
// end the pool must be whole, every sequence finished or aborted within a
// bound of steps, and every output equal to the sequence's output alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/scheduler.h"
#include "engine/scheduler_harness.h"

namespace folio {
namespace {

using testing::FakeRequest;
using testing::SchedulerHarness;
using testing::solo_output;

struct SimConfig {
  std::string name;
  int num_blocks;
  int block_size;
  int budget;
  int max_num_seqs;
  int max_model_len;
  bool chunked;
  SchedulingPolicy policy;
  bool caching;
  int num_steps;          // steps with arrivals and aborts; then the system drains
  int max_outstanding;    // sequences in the system at once (keeps latency bounded)
  int max_new_tokens;
  bool want_preemptions;
};

void PrintTo(const SimConfig& c, std::ostream* os) { *os << c.name; }

// Liveness: every sequence finishes within this many steps of its arrival
// (the outstanding cap keeps queues short; the worst seen is ~300), and the
// system drains within it once arrivals stop.
constexpr int kLatencyBoundSteps = 1000;

class SchedulerSimulationTest : public ::testing::TestWithParam<std::tuple<SimConfig, std::uint64_t>> {};

TEST_P(SchedulerSimulationTest, InvariantsLivenessAndExactness) {
  const auto& [c, seed] = GetParam();
  SchedulerConfig sc;
  sc.max_num_batched_tokens = c.budget;
  sc.max_num_seqs = c.max_num_seqs;
  sc.max_model_len = c.max_model_len;
  sc.enable_chunked_prefill = c.chunked;
  sc.policy = c.policy;
  KvCacheConfig kc;
  kc.num_blocks = c.num_blocks;
  kc.block_size = c.block_size;
  kc.enable_prefix_caching = c.caching;
  SchedulerHarness h(sc, kc);

  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto token = [&] { return static_cast<TokenId>(uniform(1, 999)); };
  std::vector<std::vector<TokenId>> docs(4);
  for (auto& doc : docs)
    for (int i = 0; i < c.max_model_len - 1; ++i) doc.push_back(token());

  SequenceId next_id = 1;
  std::map<SequenceId, SequenceId> parent_of;  // child -> parent
  std::set<SequenceId> added;
  auto arrive = [&] {
    FakeRequest r;
    const int cap = c.max_model_len - 1;
    const int kind = uniform(0, 99);
    const int len = kind < 50 ? uniform(1, std::min(32, cap)) : kind < 85 ? uniform(1, std::max(1, cap / 2))
                                                                           : uniform(cap / 2, cap);
    if (uniform(0, 1) == 0) {
      const auto& doc = docs[static_cast<std::size_t>(uniform(0, 3))];
      r.prompt.assign(doc.begin(), doc.begin() + uniform(0, len));
    }
    while (static_cast<int>(r.prompt.size()) < len) r.prompt.push_back(token());
    r.max_new_tokens = uniform(1, c.max_new_tokens);
    r.priority = uniform(0, 2);
    if (uniform(0, 99) < 15) r.salt = "tenant-b";
    const SequenceId id = next_id++;
    if (uniform(0, 99) < 10)
      for (int i = uniform(1, 2); i > 0; --i) {
        parent_of[next_id] = id;
        r.children.push_back(next_id++);
      }
    h.add(id, r);
    added.insert(id);
  };
  auto pick = [&](const std::vector<SequenceId>& ids) { return ids[static_cast<std::size_t>(uniform(0, static_cast<int>(ids.size()) - 1))]; };

  std::map<std::string, int> aborted_in;  // state -> count
  auto abort_between_steps = [&] {
    const std::vector<SequenceId> alive = h.alive_ids();
    if (alive.empty()) return;
    const SequenceId id = pick(alive);
    const SequenceState& s = h.state(id);
    const char* what = s.status == SequenceStatus::kWaiting
                           ? (s.num_preemptions > 0 ? "preempted" : "waiting")
                           : (s.num_computed_tokens < s.num_prompt_tokens ? "mid-prefill" : "decoding");
    ++aborted_in[what];
    h.abort(id);
  };
  auto abort_during_step = [&](const StepPlan& plan) {
    if (!plan.preempted.empty() && uniform(0, 1) == 0) {
      ++aborted_in["just-preempted"];
      h.abort(pick(plan.preempted));
    } else if (!plan.sequences.empty()) {
      const SequenceId id = plan.sequences[static_cast<std::size_t>(uniform(0, static_cast<int>(plan.sequences.size()) - 1))].id;
      if (!h.alive(id)) return;
      ++aborted_in["in-flight"];
      h.abort(id);
    }
  };

  std::int64_t total_steps = 0;
  auto one_step = [&](bool with_aborts) {
    ASSERT_TRUE(h.scheduler().has_work());
    const StepPlan plan = h.step([&](const StepPlan& p) {
      if (with_aborts && uniform(0, 99) < 3) abort_during_step(p);
    });
    ++total_steps;
    ASSERT_TRUE(h.error().empty()) << c.name << ": " << h.error();
    // No deadlock: work is always made.
    ASSERT_FALSE(plan.empty()) << c.name << ": an empty plan at step " << h.num_steps() << " with work left";
  };

  for (int step = 0; step < c.num_steps; ++step) {
    if (static_cast<int>(h.alive_ids().size()) < c.max_outstanding && uniform(0, 99) < 50) arrive();
    if (uniform(0, 99) < 2) {
      abort_between_steps();
      ASSERT_TRUE(h.check()) << c.name << ": " << h.error();
    }
    if (h.scheduler().has_work()) {
      ASSERT_NO_FATAL_FAILURE(one_step(/*with_aborts=*/true));
    }
  }
  const int drain_bound = kLatencyBoundSteps;
  for (int step = 0; step < drain_bound && h.scheduler().has_work(); ++step)
    ASSERT_NO_FATAL_FAILURE(one_step(/*with_aborts=*/false));
  ASSERT_FALSE(h.scheduler().has_work()) << c.name << ": not drained after " << drain_bound << " steps";
  ASSERT_TRUE(h.drained()) << c.name << ": " << h.error();

  // Every sequence ended: finished or aborted; a child exists only if its
  // parent reached its first token.
  for (SequenceId id : added)
    EXPECT_TRUE(h.finished().contains(id) || h.aborted().contains(id)) << "sequence " << id << " vanished";
  for (const auto& [child, parent] : parent_of)
    EXPECT_TRUE(h.finished().contains(child) || h.aborted().contains(child) || h.aborted().contains(parent))
        << "child " << child << " vanished";

  // Liveness and exactness.
  std::int64_t max_latency = 0;
  int max_preemptions = 0;
  for (const auto& [id, f] : h.finished()) {
    max_latency = std::max(max_latency, f.latency_steps);
    max_preemptions = std::max(max_preemptions, f.num_preemptions);
    EXPECT_LE(f.latency_steps, kLatencyBoundSteps) << "sequence " << id << " starved";
    std::string error;
    ASSERT_EQ(f.output, solo_output(sc, c.block_size, id, f.request, &error))
        << c.name << ": sequence " << id << " differs from its run alone " << error << " (preempted "
        << f.num_preemptions << " times)";
  }

  // The run exercised what it is meant to.
  const int num_finished = static_cast<int>(h.finished().size());
  EXPECT_GT(num_finished, 100);
  EXPECT_GT(h.aborted().size(), 5u);
  EXPECT_GT(h.num_forks(), 5);
  if (c.want_preemptions) {
    EXPECT_GT(h.scheduler().num_preemptions(), 10);
  }
  if (c.caching) {
    EXPECT_GT(h.num_hit_admissions(), 10);
  }
  std::string aborts;
  for (const auto& [what, n] : aborted_in) aborts += " " + what + "=" + std::to_string(n);
  std::printf("[ %-26s seed %llu ] %5lld steps, %4d finished, %3zu aborted (%s ), %4lld preemptions (max %d per seq), "
              "%4d hit admissions, %3d forks (%d queued), %3d copies, max latency %lld steps\n",
              c.name.c_str(), static_cast<unsigned long long>(seed), static_cast<long long>(total_steps), num_finished, h.aborted().size(), aborts.c_str(),
              static_cast<long long>(h.scheduler().num_preemptions()), max_preemptions, h.num_hit_admissions(),
              h.num_forks(), h.num_fork_fallbacks(), h.num_block_copies(), static_cast<long long>(max_latency));
}

// name, blocks, block size, budget, max seqs, max model len, chunked, policy, caching,
// steps, outstanding, max new tokens, want preemptions
constexpr auto kFcfs = SchedulingPolicy::kFcfs;
constexpr auto kPriority = SchedulingPolicy::kPriority;
const SimConfig kConfigs[] = {
    {"TightFcfs", 24, 4, 32, 8, 96, true, kFcfs, true, 1200, 12, 24, true},
    {"TightPriority", 24, 4, 32, 8, 96, true, kPriority, true, 1200, 12, 24, true},
    {"AmpleBudget512", 256, 16, 512, 64, 512, true, kFcfs, true, 800, 80, 32, false},
    {"Budget16", 48, 4, 16, 16, 128, true, kFcfs, true, 1200, 16, 16, true},
    {"NoChunkingFcfs", 24, 8, 128, 16, 128, false, kFcfs, true, 1000, 16, 24, true},
    {"NoChunkingPriorityNoCache", 20, 4, 64, 8, 64, false, kPriority, false, 1000, 10, 16, true},
    {"OneSequenceAtATime", 16, 4, 16, 1, 64, true, kFcfs, true, 1400, 4, 16, false},
    {"NoPrefixCache", 20, 16, 64, 32, 256, true, kFcfs, false, 1000, 16, 32, true},
    {"Cap64TightPriority", 48, 4, 256, 64, 128, true, kPriority, true, 1000, 70, 16, true},
    {"BlockSizeOne", 72, 1, 24, 8, 64, true, kFcfs, true, 1000, 10, 16, true},
    {"Budget512Priority", 64, 16, 512, 32, 512, true, kPriority, true, 800, 40, 32, true},
    {"ExactFitPool", 8, 16, 48, 4, 128, true, kFcfs, true, 1000, 6, 24, true},
};

INSTANTIATE_TEST_SUITE_P(Scheduler, SchedulerSimulationTest,
                         ::testing::Combine(::testing::ValuesIn(kConfigs), ::testing::Values(1u, 2u)),
                         [](const auto& row) {
                           return std::get<0>(row.param).name + "Seed" + std::to_string(std::get<1>(row.param));
                         });

}  // namespace
}  // namespace folio
