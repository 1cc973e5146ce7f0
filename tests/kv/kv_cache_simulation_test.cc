// A randomized scheduler against the KV cache: arrivals over shared
// documents and tenant salts, chunked prefill, decode, speculative tokens
// accepted or rolled back, forks, finishes, aborts and preemptions under pool
// pressure. KvTestDriver checks every invariant after every call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_test_driver.h"

namespace folio {
namespace {

using testing::KvTestDriver;

struct SimConfig {
  std::string name;
  int num_blocks;
  int block_size;
  int vocab;       // small vocabularies repeat blocks under different prefixes
  int hash_bits;   // < 128 forces hash collisions
  int max_tokens;  // per request
  std::uint64_t seed;
  int num_steps;
};

// Names the row in test listings instead of dumping its bytes.
void PrintTo(const SimConfig& c, std::ostream* os) { *os << c.name << " (seed " << c.seed << ")"; }

struct Waiting {
  SequenceId id;
  std::vector<TokenId> tokens;
  std::string salt;
};

struct Counts {
  int admitted = 0, hits = 0, pool_short = 0, preempted = 0, aborted = 0, finished = 0, forked = 0,
      rolled_back = 0, speculated = 0;
};

class Simulation {
 public:
  explicit Simulation(const SimConfig& c) : c_(c), rng_(c.seed), d_(make_config(c)) {
    for (int i = 0; i < 6; ++i) {
      std::vector<TokenId> doc;
      for (int j = 0; j < c.max_tokens / 2; ++j) doc.push_back(token());
      docs_.push_back(doc);
    }
  }

  const KvTestDriver& driver() const { return d_; }
  const Counts& counts() const { return n_; }

  // One scheduler step; false once an invariant broke.
  bool step() {
    const int action = uniform(0, 99);
    if (action < 15) {
      arrive();
    } else if (action < 35) {
      admit();
    } else if (action < 90) {
      if (!running_.empty()) advance(pick_running());
    } else if (action < 93) {
      if (!running_.empty()) abort(pick_running());
    } else if (action < 96) {
      if (!running_.empty()) preempt(pick_running());
    } else {
      if (!running_.empty()) fork(pick_running());
    }
    return d_.error().empty();
  }

  // Frees everything; the pool must be whole again.
  bool drain() {
    while (!running_.empty()) abort(running_.back());
    const KvUsage u = d_.kv().usage();
    return d_.error().empty() && u.num_free_blocks == u.num_blocks && u.num_empty_slots == 0;
  }

 private:
  static KvCacheConfig make_config(const SimConfig& c) {
    KvCacheConfig k;
    k.num_blocks = c.num_blocks;
    k.block_size = c.block_size;
    k.cache_options.hash_bits = c.hash_bits;
    return k;
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  TokenId token() { return static_cast<TokenId>(uniform(0, c_.vocab - 1)); }
  SequenceId pick_running() { return running_[static_cast<std::size_t>(uniform(0, static_cast<int>(running_.size()) - 1))]; }

  void arrive() {
    if (waiting_.size() >= 8) return;
    const auto& doc = docs_[static_cast<std::size_t>(uniform(0, static_cast<int>(docs_.size()) - 1))];
    std::vector<TokenId> prompt(doc.begin(), doc.begin() + uniform(0, static_cast<int>(doc.size())));
    for (int i = uniform(1, 3 * c_.block_size); i > 0; --i) prompt.push_back(token());
    static const char* kSalts[] = {"", "tenant-a", "tenant-b"};
    waiting_.push_back({next_id_++, prompt, kSalts[uniform(0, 2)]});
  }

  void admit() {
    if (waiting_.empty()) return;
    Waiting w = waiting_.front();
    const int chunk = uniform(1, 3 * c_.block_size);
    auto hit = d_.admit(w.id, w.tokens, w.salt, chunk);
    if (!hit) {
      ++n_.pool_short;
      relieve_pressure(std::nullopt);
      return;
    }
    waiting_.pop_front();
    running_.push_back(w.id);
    ++n_.admitted;
    if (*hit > 0) ++n_.hits;
  }

  // Prefill a chunk, settle speculation, or decode (plain or speculative).
  void advance(SequenceId id) {
    const auto& r = d_.request(id);
    const int num_tokens = static_cast<int>(r.tokens.size());
    bool ok = true;
    if (r.num_written < num_tokens) {
      ok = d_.prefill(id, uniform(1, 3 * c_.block_size));
    } else if (r.num_verified < r.num_written) {
      const int unverified = r.num_written - r.num_verified;
      const int accepted = uniform(0, unverified);
      if (accepted < unverified) ++n_.rolled_back;
      d_.accept(id, accepted);
    } else if (num_tokens >= c_.max_tokens || uniform(0, 99) < 4) {
      d_.free(id);
      remove_running(id);
      ++n_.finished;
      return;
    } else if (uniform(0, 99) < 30) {
      std::vector<TokenId> drafts(static_cast<std::size_t>(uniform(1, 4)));
      for (auto& t : drafts) t = token();
      ok = d_.append(id, drafts, /*verified=*/false);
      if (ok) ++n_.speculated;
    } else {
      ok = d_.append(id, {token()}, /*verified=*/true);
    }
    if (!ok) {
      ++n_.pool_short;
      relieve_pressure(id);
    }
  }

  // The pool is short: preempt the newest other request, as a scheduler
  // would; a request alone that cannot grow is finished.
  void relieve_pressure(std::optional<SequenceId> stuck) {
    for (auto it = running_.rbegin(); it != running_.rend(); ++it)
      if (!stuck || *it != *stuck) {
        preempt(*it);
        return;
      }
    if (stuck) {
      d_.free(*stuck);
      remove_running(*stuck);
      ++n_.finished;
    }
  }

  void abort(SequenceId id) {
    d_.free(id);
    remove_running(id);
    ++n_.aborted;
  }

  // Recompute later: the request waits again with its verified tokens (and
  // any prompt it had not prefilled yet) as its prompt.
  void preempt(SequenceId id) {
    const auto& r = d_.request(id);
    std::vector<TokenId> tokens = r.tokens;
    if (r.num_written == static_cast<int>(tokens.size())) tokens.resize(static_cast<std::size_t>(r.num_verified));
    Waiting w{id, tokens, r.salt};
    d_.free(id);
    remove_running(id);
    if (!w.tokens.empty()) waiting_.push_front(w);
    ++n_.preempted;
  }

  void fork(SequenceId id) {
    const auto& r = d_.request(id);
    if (r.num_written != static_cast<int>(r.tokens.size()) || r.num_verified != r.num_written) return;
    const SequenceId child = next_id_++;
    if (!d_.fork(id, child)) {
      ++n_.pool_short;
      return;
    }
    running_.push_back(child);
    ++n_.forked;
  }

  void remove_running(SequenceId id) { running_.erase(std::find(running_.begin(), running_.end(), id)); }

  SimConfig c_;
  std::mt19937_64 rng_;
  KvTestDriver d_;
  std::vector<std::vector<TokenId>> docs_;
  std::deque<Waiting> waiting_;
  std::vector<SequenceId> running_;
  SequenceId next_id_ = 1;
  Counts n_;
};

class KvSimulationTest : public ::testing::TestWithParam<SimConfig> {};

TEST_P(KvSimulationTest, InvariantsHoldAtEveryStep) {
  const SimConfig& c = GetParam();
  Simulation sim(c);
  for (int step = 0; step < c.num_steps; ++step)
    ASSERT_TRUE(sim.step()) << "step " << step << ": " << sim.driver().error();
  ASSERT_TRUE(sim.drain()) << sim.driver().error();

  // The run exercised what it is meant to.
  const Counts& n = sim.counts();
  EXPECT_GT(n.admitted, 200);
  if (c.hash_bits > 0) {
    EXPECT_GT(n.hits, 20);
  }
  EXPECT_GT(n.pool_short, 10);
  EXPECT_GT(n.preempted, 10);
  EXPECT_GT(n.aborted, 10);
  EXPECT_GT(n.finished, 10);
  EXPECT_GT(n.forked, 10);
  EXPECT_GT(n.speculated, 100);
  EXPECT_GT(n.rolled_back, 50);
  const KvCacheManager& kv = sim.driver().kv();
  EXPECT_GT(kv.pool().num_evictions(), 50);
  if (c.hash_bits > 0) {
    EXPECT_GT(kv.prefix_cache_stats().num_hit_tokens, 0);
  }
  if (c.hash_bits < 16) {
    EXPECT_GT(kv.prefix_cache_stats().num_collisions, 100);
  }
}

// name, blocks, block size, vocab, hash bits, max tokens, seed, steps
INSTANTIATE_TEST_SUITE_P(
    Seeds, KvSimulationTest,
    ::testing::Values(SimConfig{"Roomy", 96, 4, 50, 128, 80, 1, 12000},
                      SimConfig{"Tight", 32, 4, 50, 128, 60, 2, 12000},
                      SimConfig{"TightOtherSeed", 32, 4, 50, 128, 60, 3, 12000},
                      SimConfig{"Block16", 48, 16, 50, 128, 160, 4, 12000},
                      SimConfig{"TinyVocabForcedCollisions", 48, 4, 2, 3, 60, 5, 12000},
                      SimConfig{"EveryHashCollides", 32, 4, 3, 0, 60, 6, 12000}),
    [](const auto& row) { return row.param.name; });

}  // namespace
}  // namespace folio
