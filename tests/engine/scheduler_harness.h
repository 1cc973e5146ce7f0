// SchedulerHarness: an engine loop around a Scheduler with no model. A fake
// model reads the KV of every position it attends to and writes a hash of
// (previous position's KV, token), so wrong placement, a bad prefix hit or a
// missed block copy changes the tokens it samples. Every step is checked:
// the plan against the budget, the cap and the queue order, every slot read
// against what it must hold, and the pool against the block tables.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/scheduler.h"
#include "kv/block_table.h"
#include "kv/kv_cache_manager.h"

namespace folio::testing {

// ---- The fake model: deterministic, and a function of the KV it reads. ----

inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What position -1 "holds": the cache salt, so a hit across salts is wrong KV.
inline std::uint64_t fake_kv_root(std::string_view salt) {
  std::uint64_t h = 0x5a17;
  for (char c : salt) h = mix64(h ^ static_cast<unsigned char>(c));
  return h;
}

// The KV a position holds: depends on the previous position's KV (as a
// transformer's does, through attention in the lower layers) and its token.
inline std::uint64_t fake_kv_entry(std::uint64_t previous, TokenId token) {
  return mix64(previous ^ mix64(static_cast<std::uint64_t>(token) * 0x2545f4914f6cdd1dull));
}

// The next token of sequence `id` (its sampler seed) from the logits, which
// fold every KV entry the last position attends to.
inline TokenId fake_sample(std::uint64_t logits, SequenceId id, int vocab) {
  return static_cast<TokenId>(mix64(logits ^ mix64(id + 0x1234567)) % static_cast<std::uint64_t>(vocab));
}

struct FakeRequest {
  std::vector<TokenId> prompt;
  int max_new_tokens = 4;
  int priority = 0;
  std::string salt;
  std::vector<SequenceId> children;  // n > 1: forked from this one when its prompt is done
};

struct FinishedSequence {
  FakeRequest request;           // children cleared; a child's prompt is its parent's
  std::vector<TokenId> output;
  std::int64_t latency_steps = 0;  // steps from add (or fork) to finish
  int num_preemptions = 0;
  int num_cached_tokens = 0;
};

class SchedulerHarness {
 public:
  SchedulerHarness(const SchedulerConfig& config, const KvCacheConfig& kv_config, int vocab = 1000)
      : kv_(kv_config),
        scheduler_(config, kv_),
        config_(config),
        caching_(kv_config.enable_prefix_caching),
        block_size_(kv_config.block_size),
        vocab_(vocab),
        shadow_(static_cast<std::size_t>(kv_config.num_blocks) * kv_config.block_size, 0) {}

  Scheduler& scheduler() { return scheduler_; }
  KvCacheManager& kv() { return kv_; }
  const SequenceState& state(SequenceId id) const { return *scheduler_.find(id); }
  const std::map<SequenceId, FinishedSequence>& finished() const { return finished_; }
  const std::set<SequenceId>& aborted() const { return aborted_; }
  std::int64_t num_steps() const { return step_; }
  int num_forks() const { return num_forks_; }
  int num_fork_fallbacks() const { return num_fork_fallbacks_; }
  int num_hit_admissions() const { return num_hit_admissions_; }
  int num_block_copies() const { return num_block_copies_; }
  bool alive(SequenceId id) const { return seqs_.contains(id); }
  std::vector<SequenceId> alive_ids() const {
    std::vector<SequenceId> ids;
    for (const auto& [id, seq] : seqs_) ids.push_back(id);
    return ids;
  }
  // The first broken invariant, or "" when all held so far.
  const std::string& error() const { return error_; }

  void add(SequenceId id, FakeRequest request) {
    scheduler_.add(id, request.prompt, request.priority, request.salt);
    Seq seq;
    seq.request = std::move(request);
    seq.added_step = step_;
    seqs_.emplace(id, std::move(seq));
    insert_waiting(id, /*front=*/false);
  }

  // Ends a sequence in whatever state it is (an abort). Call check() after,
  // unless a step is in flight (between schedule and complete_step).
  void abort(SequenceId id) {
    expect(scheduler_.finish(id), fmt::format("finish({}) did not know the sequence", id));
    forget(id);
    aborted_.insert(id);
  }

  // One engine step; `during` runs after the forward pass, before
  // complete_step (a request aborted while the step ran).
  StepPlan step(const std::function<void(const StepPlan&)>& during = nullptr) {
    ++step_;
    std::map<SequenceId, Before> before;
    for (const auto& [id, seq] : seqs_) {
      const SequenceState& s = state(id);
      before[id] = {s.status, s.num_computed_tokens, s.num_tokens(), s.num_preemptions, s.num_cached_tokens};
    }
    const std::vector<SequenceId> running_before = running_order_;
    const std::deque<SequenceId> waiting_before = waiting_order_;

    StepPlan plan = scheduler_.schedule();
    check_plan(plan, before, running_before, waiting_before);
    const std::map<SequenceId, std::uint64_t> logits = forward(plan);
    if (during) during(plan);
    scheduler_.complete_step(plan);

    for (const ScheduledSequence& q : plan.sequences) {
      if (!q.sample || !seqs_.contains(q.id)) continue;
      const std::uint64_t l = logits.at(q.id);
      Seq& seq = seqs_.at(q.id);
      if (!seq.forked && state(q.id).num_output_tokens() == 0) {
        seq.forked = true;
        const std::vector<SequenceId> children = seq.request.children;
        for (SequenceId child : children) fork(q.id, child, l);
      }
      scheduler_.append_token(q.id, fake_sample(l, q.id, vocab_));
      finish_if_done(q.id);
    }
    check();
    return plan;
  }

  // Steps until no work is left; false when that takes over max_steps or an
  // invariant broke.
  bool run(int max_steps) {
    for (int i = 0; i < max_steps && scheduler_.has_work(); ++i) {
      step();
      if (!error_.empty()) return false;
    }
    if (scheduler_.has_work()) expect(false, fmt::format("work left after {} steps", max_steps));
    return error_.empty();
  }

  // Nothing left: every block free (cached ones stay hits), no request known.
  bool drained() {
    const KvUsage u = kv_.usage();
    expect(!scheduler_.has_work() && seqs_.empty(), "sequences left");
    expect(kv_.num_sequences() == 0, fmt::format("the KV cache still knows {} sequences", kv_.num_sequences()));
    expect(u.num_used_blocks == 0 && u.num_free_blocks == u.num_blocks,
           fmt::format("{} blocks still used after draining", u.num_used_blocks));
    expect(u.num_empty_slots == 0, "empty slots counted after draining");
    expect(u.num_cached_free_blocks == u.num_cached_blocks, "a cached block is not free after draining");
    return error_.empty();
  }

  // Every invariant between steps; false (and error() set) at the first
  // broken one.
  bool check() {
    if (!error_.empty()) return false;
    const BlockPool& pool = kv_.pool();
    const PrefixCache& cache = pool.cache();
    const KvUsage u = kv_.usage();
    expect(u.num_free_blocks + u.num_used_blocks == u.num_blocks, "free + used != total");
    expect(u.num_free_blocks == pool.free_queue().size(), "free count != free queue length");

    std::vector<int> refs(static_cast<std::size_t>(pool.num_blocks()), 0);
    std::int64_t empty_slots = 0;
    int num_running = 0;
    for (const auto& [id, seq] : seqs_) {
      const SequenceState* s = scheduler_.find(id);
      if (s == nullptr) {
        expect(false, fmt::format("sequence {} vanished from the scheduler", id));
        continue;
      }
      if (s->status == SequenceStatus::kWaiting) {
        expect(!kv_.contains(id), fmt::format("waiting sequence {} holds KV blocks", id));
        expect(s->num_computed_tokens == 0, fmt::format("waiting sequence {} counts computed tokens", id));
        continue;
      }
      expect(s->status == SequenceStatus::kRunning, fmt::format("sequence {} is finished but still known", id));
      ++num_running;
      if (!kv_.contains(id)) {
        expect(false, fmt::format("running sequence {} holds no KV blocks", id));
        continue;
      }
      expect(kv_.num_tokens(id) == s->num_computed_tokens,
             fmt::format("sequence {} holds slots for {} tokens but fed {}", id, kv_.num_tokens(id),
                         s->num_computed_tokens));
      expect(kv_.num_verified_tokens(id) == s->num_computed_tokens,
             fmt::format("sequence {}: {} tokens committed, {} fed", id, kv_.num_verified_tokens(id),
                         s->num_computed_tokens));
      expect(s->num_computed_tokens <= s->num_tokens(), fmt::format("sequence {} fed tokens it lacks", id));
      const BlockTable& table = kv_.block_table(id);
      expect(table.num_blocks() == BlockTable::blocks_for(kv_.num_tokens(id), block_size_),
             fmt::format("sequence {}: {} blocks for {} tokens", id, table.num_blocks(), kv_.num_tokens(id)));
      empty_slots += table.num_slots() - kv_.num_tokens(id);
      for (int i = 0; i < table.num_blocks(); ++i) {
        ++refs[static_cast<std::size_t>(table[i])];
        if (cache.is_cached(table[i]))
          expect((i + 1) * block_size_ <= kv_.num_verified_tokens(id),
                 fmt::format("sequence {}: cached block {} holds unverified tokens", id, table[i]));
      }
    }
    expect(kv_.num_sequences() == num_running,
           fmt::format("the KV cache knows {} sequences, {} are running", kv_.num_sequences(), num_running));
    expect(scheduler_.num_running() == num_running && num_running == static_cast<int>(running_order_.size()),
           fmt::format("running count: scheduler {}, statuses {}, shadow {}", scheduler_.num_running(), num_running,
                       running_order_.size()));
    expect(scheduler_.num_waiting() == static_cast<int>(waiting_order_.size()),
           fmt::format("waiting count: scheduler {}, shadow {}", scheduler_.num_waiting(), waiting_order_.size()));
    expect(num_running <= config_.max_num_seqs,
           fmt::format("{} sequences running, cap {}", num_running, config_.max_num_seqs));
    expect(empty_slots == u.num_empty_slots, "empty slot count drifted");

    int num_cached = 0;
    int num_cached_free = 0;
    for (BlockId b = 0; b < pool.num_blocks(); ++b) {
      const int ref = pool.ref_count(b);
      expect(ref == refs[static_cast<std::size_t>(b)],
             fmt::format("block {}: ref count {} but {} block-table references", b, ref,
                         refs[static_cast<std::size_t>(b)]));
      expect((ref == 0) == pool.free_queue().contains(b), fmt::format("block {}: free queue disagrees", b));
      if (cache.is_cached(b)) {
        ++num_cached;
        if (ref == 0) ++num_cached_free;
      }
    }
    expect(num_cached == cache.num_cached_blocks(), "cached block count drifted");
    expect(num_cached_free == pool.num_cached_free_blocks(), "cached free block count drifted");
    return error_.empty();
  }

 private:
  struct Seq {
    FakeRequest request;
    std::vector<std::uint64_t> expected;  // [tokens]: the KV each position must hold
    bool forked = false;
    std::int64_t added_step = 0;
  };
  struct Before {
    SequenceStatus status;
    int num_computed_tokens;
    int num_tokens;
    int num_preemptions;
    int num_cached_tokens;
  };
  struct PendingCopy {
    SequenceId child;
    BlockCopy copy;
  };

  void expect(bool ok, const std::string& what) {
    if (!ok && error_.empty()) error_ = fmt::format("step {}: {}", step_, what);
  }

  bool fcfs() const { return config_.policy == SchedulingPolicy::kFcfs; }
  std::pair<int, std::uint64_t> key(SequenceId id) const { return {state(id).priority, state(id).arrival}; }

  // The waiting order the scheduler promises: FCFS: arrivals at the back,
  // preempted at the front; kPriority: by (priority, arrival), ties in
  // insertion order.
  void insert_waiting(SequenceId id, bool front) {
    if (fcfs()) {
      if (front) {
        waiting_order_.push_front(id);
      } else {
        waiting_order_.push_back(id);
      }
      return;
    }
    auto pos = std::upper_bound(waiting_order_.begin(), waiting_order_.end(), id,
                                [&](SequenceId a, SequenceId b) { return key(a) < key(b); });
    waiting_order_.insert(pos, id);
  }

  void forget(SequenceId id) {
    seqs_.erase(id);
    std::erase(running_order_, id);
    std::erase(waiting_order_, id);
  }

  const std::vector<std::uint64_t>& expected_kv(SequenceId id) {
    Seq& seq = seqs_.at(id);
    const std::vector<TokenId>& tokens = state(id).tokens;
    for (std::size_t p = seq.expected.size(); p < tokens.size(); ++p)
      seq.expected.push_back(
          fake_kv_entry(p == 0 ? fake_kv_root(seq.request.salt) : seq.expected[p - 1], tokens[p]));
    return seq.expected;
  }

  void check_plan(const StepPlan& plan, const std::map<SequenceId, Before>& before,
                  const std::vector<SequenceId>& running_before, const std::deque<SequenceId>& waiting_before) {
    const int budget = config_.max_num_batched_tokens;
    expect(plan.num_tokens <= budget, fmt::format("plan feeds {} tokens, budget {}", plan.num_tokens, budget));
    expect(static_cast<int>(plan.sequences.size()) <= config_.max_num_seqs,
           fmt::format("plan runs {} sequences, cap {}", plan.sequences.size(), config_.max_num_seqs));
    int sum = 0;
    std::map<SequenceId, const ScheduledSequence*> planned;
    for (const ScheduledSequence& q : plan.sequences) {
      expect(q.num_new_tokens >= 1, fmt::format("sequence {} scheduled with {} tokens", q.id, q.num_new_tokens));
      sum += q.num_new_tokens;
      expect(planned.emplace(q.id, &q).second, fmt::format("sequence {} scheduled twice", q.id));
    }
    expect(sum == plan.num_tokens, fmt::format("plan says {} tokens, its sequences feed {}", plan.num_tokens, sum));

    std::set<SequenceId> preempted;
    for (SequenceId id : plan.preempted) {
      expect(preempted.insert(id).second, fmt::format("sequence {} preempted twice", id));
      expect(!planned.contains(id), fmt::format("preempted sequence {} is in the plan", id));
      expect(before.contains(id) && before.at(id).status == SequenceStatus::kRunning,
             fmt::format("sequence {} preempted but was not running", id));
      const SequenceState* s = scheduler_.find(id);
      expect(s != nullptr && s->status == SequenceStatus::kWaiting && s->num_computed_tokens == 0 &&
                 !kv_.contains(id),
             fmt::format("preempted sequence {} is not waiting without blocks", id));
      if (s != nullptr && before.contains(id))
        expect(s->num_preemptions == before.at(id).num_preemptions + 1,
               fmt::format("sequence {}: preemption not counted", id));
    }

    std::vector<SequenceId> admitted;
    for (const ScheduledSequence& q : plan.sequences) {
      const SequenceState* s = scheduler_.find(q.id);
      if (s == nullptr || !before.contains(q.id)) {
        expect(false, fmt::format("plan schedules unknown sequence {}", q.id));
        continue;
      }
      const Before& b = before.at(q.id);
      expect(s->status == SequenceStatus::kRunning, fmt::format("scheduled sequence {} is not running", q.id));
      expect(q.num_computed_tokens == s->num_computed_tokens,
             fmt::format("sequence {}: plan starts at {}, state says {}", q.id, q.num_computed_tokens,
                         s->num_computed_tokens));
      expect(q.num_computed_tokens + q.num_new_tokens <= s->num_tokens(),
             fmt::format("sequence {} feeds past its tokens", q.id));
      expect(q.sample == (q.num_computed_tokens + q.num_new_tokens == s->num_tokens()),
             fmt::format("sequence {}: sample is {} at {} + {} of {} tokens", q.id, q.sample,
                         q.num_computed_tokens, q.num_new_tokens, s->num_tokens()));
      expect(kv_.contains(q.id) && kv_.num_tokens(q.id) == q.num_computed_tokens + q.num_new_tokens,
             fmt::format("sequence {} lacks slots for its planned tokens", q.id));
      if (!config_.enable_chunked_prefill)
        expect(q.sample, fmt::format("sequence {}: a partial chunk with chunked prefill off", q.id));
      if (b.status == SequenceStatus::kRunning) {
        expect(q.num_computed_tokens == b.num_computed_tokens, fmt::format("sequence {} skipped tokens", q.id));
        continue;
      }
      // Admitted this step, after a prefix hit of whole blocks (or none).
      admitted.push_back(q.id);
      ++num_admissions_;
      if (q.num_computed_tokens > 0) ++num_hit_admissions_;
      expect(q.num_computed_tokens % block_size_ == 0 && q.num_computed_tokens < s->num_tokens() &&
                 (caching_ || q.num_computed_tokens == 0),
             fmt::format("sequence {} admitted at {} of {} tokens", q.id, q.num_computed_tokens, s->num_tokens()));
      const int want_cached =
          b.num_cached_tokens >= 0 ? b.num_cached_tokens : std::min(q.num_computed_tokens, s->num_prompt_tokens);
      expect(s->num_cached_tokens == want_cached,
             fmt::format("sequence {}: num_cached_tokens {} want {}", q.id, s->num_cached_tokens, want_cached));
    }

    // Admission: none after a preemption, otherwise the head of the queue in order.
    expect(admitted.empty() || plan.preempted.empty(), "admitted new work in a step that preempted");
    for (std::size_t i = 0; i < admitted.size(); ++i)
      expect(i < waiting_before.size() && waiting_before[i] == admitted[i],
             fmt::format("admitted {} out of queue order (head {})", admitted[i],
                         i < waiting_before.size() ? waiting_before[i] : 0));

    // Victims: FCFS takes the most recently admitted first; kPriority the
    // lowest priority (highest key), latest arrival among equals.
    std::vector<SequenceId> left = running_before;
    for (SequenceId v : plan.preempted) {
      if (std::find(left.begin(), left.end(), v) == left.end()) continue;  // reported above
      if (fcfs()) {
        expect(v == left.back(), fmt::format("FCFS preempted {}, not the newest running {}", v, left.back()));
      } else {
        for (SequenceId r : left)
          expect(key(r) <= key(v), fmt::format("kPriority preempted {} before lower-priority {}", v, r));
      }
      std::erase(left, v);
    }

    // Running sequences in admission order, each feeding what it can.
    // Under FCFS (victims are never planned before) and whenever nobody was
    // preempted, the plan is exactly min(remaining, budget left) in order.
    if (fcfs() || plan.preempted.empty()) {
      int budget_left = budget;
      for (SequenceId id : left) {
        const Before& b = before.at(id);
        const int n = std::min(b.num_tokens - b.num_computed_tokens, budget_left);
        const auto it = planned.find(id);
        if (n > 0) {
          expect(it != planned.end() && it->second->num_new_tokens == n,
                 fmt::format("running sequence {} should feed {} tokens, plan says {}", id, n,
                             it == planned.end() ? 0 : it->second->num_new_tokens));
        } else {
          expect(it == planned.end(), fmt::format("sequence {} scheduled with nothing to feed", id));
        }
        budget_left -= std::max(n, 0);
      }
    } else {
      for (SequenceId id : left) {
        const Before& b = before.at(id);
        if (b.num_tokens > b.num_computed_tokens && !planned.contains(id))
          expect(plan.num_tokens == budget, fmt::format("running sequence {} left out with budget left", id));
      }
    }
    // Decodes come before prefill chunks: a decode left out means the plan is all decodes.
    for (SequenceId id : left) {
      const Before& b = before.at(id);
      const bool decode = b.num_tokens - b.num_computed_tokens == 1 && b.num_tokens > state(id).num_prompt_tokens;
      if (!decode || planned.contains(id)) continue;
      for (const ScheduledSequence& q : plan.sequences) {
        const Before& qb = before.at(q.id);
        expect(qb.status == SequenceStatus::kRunning && q.num_new_tokens == 1 && q.sample &&
                   qb.num_tokens > state(q.id).num_prompt_tokens,
               fmt::format("decode of {} left out while {} feeds {} prefill tokens", id, q.id, q.num_new_tokens));
      }
    }

    // Update the shadow queues.
    for (SequenceId v : plan.preempted) {
      std::erase(running_order_, v);
      insert_waiting(v, /*front=*/true);
    }
    for (SequenceId a : admitted) {
      std::erase(waiting_order_, a);
      running_order_.push_back(a);
    }

    // Nobody is kept waiting without a reason: the budget, the cap, the
    // whole-prompt rule or the pool.
    if (plan.preempted.empty() && !waiting_order_.empty()) {
      const SequenceState& head = state(waiting_order_.front());
      const int budget_left = budget - plan.num_tokens;
      const bool blocked = budget_left == 0 || scheduler_.num_running() >= config_.max_num_seqs ||
                           (!config_.enable_chunked_prefill && head.num_tokens() > budget_left) ||
                           kv_.usage().num_free_blocks < BlockTable::blocks_for(head.num_tokens(), block_size_);
      expect(blocked, fmt::format("sequence {} ({} tokens) kept waiting with {} tokens of budget and {} free blocks",
                                  head.id, head.num_tokens(), budget_left, kv_.usage().num_free_blocks));
    }

    // Forks made since the last step: their copies are in this plan (unless
    // the child left meanwhile).
    std::vector<BlockCopy> want_copies;
    for (const PendingCopy& pc : pending_copies_)
      if (seqs_.contains(pc.child) && !preempted.contains(pc.child)) want_copies.push_back(pc.copy);
    for (const BlockCopy& c : want_copies)
      expect(std::find(plan.block_copies.begin(), plan.block_copies.end(), c) != plan.block_copies.end(),
             fmt::format("fork copy {} -> {} missing from the plan", c.src, c.dst));
    pending_copies_.clear();
  }

  // The model runner: block copies first, then every scheduled sequence
  // reads the KV of its prefix and writes its new tokens' KV. Returns the
  // logits of the sequences that sample.
  std::map<SequenceId, std::uint64_t> forward(const StepPlan& plan) {
    const BlockPool& pool = kv_.pool();
    for (const BlockCopy& c : plan.block_copies) {
      expect(c.src != c.dst, "block copy onto itself");
      std::copy_n(shadow_.begin() + static_cast<std::ptrdiff_t>(c.src) * block_size_, block_size_,
                  shadow_.begin() + static_cast<std::ptrdiff_t>(c.dst) * block_size_);
      ++num_block_copies_;
    }
    std::map<SequenceId, std::uint64_t> logits;
    std::vector<SlotId> slots;
    for (const ScheduledSequence& q : plan.sequences) {
      if (!seqs_.contains(q.id) || !kv_.contains(q.id)) continue;  // reported by check_plan
      const std::vector<std::uint64_t>& expected = expected_kv(q.id);
      const std::vector<TokenId>& tokens = state(q.id).tokens;
      const int end = q.num_computed_tokens + q.num_new_tokens;
      slots.clear();
      kv_.slot_mapping(q.id, 0, end, slots);
      for (int p = 0; p < q.num_computed_tokens; ++p)
        if (shadow_[static_cast<std::size_t>(slots[static_cast<std::size_t>(p)])] !=
            expected[static_cast<std::size_t>(p)]) {
          expect(false, fmt::format("sequence {} reads wrong KV at position {} (block {})", q.id, p,
                                    slots[static_cast<std::size_t>(p)] / block_size_));
          break;
        }
      for (int p = q.num_computed_tokens; p < end; ++p) {
        const SlotId slot = slots[static_cast<std::size_t>(p)];
        const BlockId b = static_cast<BlockId>(slot / block_size_);
        expect(pool.ref_count(b) == 1 && !pool.cache().is_cached(b),
               fmt::format("sequence {} writes block {} (ref count {}, cached {})", q.id, b, pool.ref_count(b),
                           pool.cache().is_cached(b)));
        const std::uint64_t previous = p == 0 ? fake_kv_root(seqs_.at(q.id).request.salt)
                                              : shadow_[static_cast<std::size_t>(slots[static_cast<std::size_t>(p - 1)])];
        shadow_[static_cast<std::size_t>(slot)] = fake_kv_entry(previous, tokens[static_cast<std::size_t>(p)]);
      }
      if (!q.sample) continue;
      std::uint64_t l = 0;
      for (int p = 0; p < end; ++p) l = mix64(l ^ shadow_[static_cast<std::size_t>(slots[static_cast<std::size_t>(p)])]);
      logits[q.id] = l;
    }
    return logits;
  }

  // n > 1: the child shares the parent's prompt; it samples its first token
  // from the parent's logits with its own seed, or queues and recomputes.
  void fork(SequenceId parent, SequenceId child, std::uint64_t logits) {
    const std::vector<BlockId> parent_blocks = kv_.block_table(parent).blocks();
    const int parent_tokens = kv_.num_tokens(parent);
    scheduler_.fork(parent, child);
    ++num_forks_;
    Seq seq;
    seq.request = seqs_.at(parent).request;
    seq.request.children.clear();
    seq.request.prompt = state(child).tokens;
    seq.added_step = step_;
    seq.forked = true;
    seqs_.emplace(child, std::move(seq));
    if (state(child).status == SequenceStatus::kWaiting) {
      ++num_fork_fallbacks_;
      expect(!kv_.contains(child), fmt::format("queued fork child {} holds blocks", child));
      insert_waiting(child, /*front=*/false);
      return;
    }
    // Next to its parent and earlier siblings (same arrival), as old as they are.
    auto pos = std::find(running_order_.begin(), running_order_.end(), parent) + 1;
    while (pos != running_order_.end() && state(*pos).arrival == state(child).arrival) ++pos;
    running_order_.insert(pos, child);
    // Full blocks shared; a partial last block copied into the child's own.
    const std::vector<BlockId>& blocks = kv_.block_table(child).blocks();
    const int num_full = parent_tokens / block_size_;
    expect(blocks.size() == parent_blocks.size() &&
               std::equal(parent_blocks.begin(), parent_blocks.begin() + num_full, blocks.begin()),
           fmt::format("fork child {} does not share parent {}'s full blocks", child, parent));
    if (parent_tokens % block_size_ != 0) {
      expect(blocks.back() != parent_blocks.back(), fmt::format("fork child {} shares a partial block", child));
      pending_copies_.push_back({child, {parent_blocks.back(), blocks.back()}});
    }
    scheduler_.append_token(child, fake_sample(logits, child, vocab_));
    finish_if_done(child);
  }

  void finish_if_done(SequenceId id) {
    const SequenceState& s = state(id);
    const Seq& seq = seqs_.at(id);
    if (s.num_output_tokens() < seq.request.max_new_tokens && s.num_tokens() < config_.max_model_len) return;
    FinishedSequence f;
    f.request = seq.request;
    f.output.assign(s.tokens.begin() + s.num_prompt_tokens, s.tokens.end());
    f.latency_steps = step_ - seq.added_step;
    f.num_preemptions = s.num_preemptions;
    f.num_cached_tokens = s.num_cached_tokens;
    finished_[id] = std::move(f);
    expect(scheduler_.finish(id), fmt::format("finish({}) did not know the sequence", id));
    forget(id);
  }

  KvCacheManager kv_;
  Scheduler scheduler_;
  SchedulerConfig config_;
  bool caching_;
  int block_size_;
  int vocab_;
  std::vector<std::uint64_t> shadow_;  // [num_blocks * block_size]: the KV each slot holds
  std::map<SequenceId, Seq> seqs_;
  std::vector<SequenceId> running_order_;
  std::deque<SequenceId> waiting_order_;
  std::vector<PendingCopy> pending_copies_;
  std::map<SequenceId, FinishedSequence> finished_;
  std::set<SequenceId> aborted_;
  std::int64_t step_ = 0;
  int num_forks_ = 0;
  int num_fork_fallbacks_ = 0;
  int num_admissions_ = 0;
  int num_hit_admissions_ = 0;
  int num_block_copies_ = 0;
  std::string error_;
};

// What `request` produces run alone through a scheduler with an ample pool
// and no prefix cache: the reference every shared run must equal.
inline std::vector<TokenId> solo_output(const SchedulerConfig& config, int block_size, SequenceId id,
                                        FakeRequest request, std::string* error = nullptr) {
  request.children.clear();
  KvCacheConfig kv;
  kv.block_size = block_size;
  kv.num_blocks = 2 * BlockTable::blocks_for(config.max_model_len, block_size);
  kv.enable_prefix_caching = false;
  SchedulerHarness solo(config, kv);
  solo.add(id, std::move(request));
  const bool ok = solo.run(10 * config.max_model_len + 100) && solo.drained() &&
                  solo.scheduler().num_preemptions() == 0;
  if (error != nullptr && !ok) *error = solo.error().empty() ? "preempted while alone" : solo.error();
  return ok ? solo.finished().at(id).output : std::vector<TokenId>{};
}

}  // namespace folio::testing
