#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace folio {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {
  if (config_.max_num_batched_tokens <= 0 || config_.max_num_seqs <= 0 || config_.max_model_len <= 0)
    fail("scheduler limits must be positive (max_num_batched_tokens {}, max_num_seqs {}, max_model_len {})",
         config_.max_num_batched_tokens, config_.max_num_seqs, config_.max_model_len);
  // A sequence alone must always fit, or preemption could not make room.
  const std::int64_t capacity = static_cast<std::int64_t>(kv_.usage().num_blocks) * kv_.block_size();
  if (capacity < config_.max_model_len)
    fail("the KV cache holds {} tokens, fewer than one sequence of max_model_len {}; give it more memory or "
         "lower --max-model-len", capacity, config_.max_model_len);
  if (!config_.enable_chunked_prefill && config_.max_num_batched_tokens < config_.max_model_len)
    fail("without chunked prefill --max-num-batched-tokens ({}) must hold a whole prompt of up to {} tokens",
         config_.max_num_batched_tokens, config_.max_model_len);
}

SequenceState& Scheduler::state(SequenceId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) fail("scheduler: unknown sequence {}", id);
  return it->second;
}

const SequenceState* Scheduler::find(SequenceId id) const {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : &it->second;
}

void Scheduler::add(SequenceId id, std::vector<TokenId> prompt, int priority, std::string cache_salt,
                    bool prompt_logits) {
  if (sequences_.contains(id)) fail("scheduler: sequence {} already exists", id);
  if (prompt.empty()) fail("the prompt is empty; give at least one token");
  if (static_cast<int>(prompt.size()) >= config_.max_model_len)
    fail("the prompt has {} tokens but the context holds {}; shorten it or raise --max-model-len", prompt.size(),
         config_.max_model_len);
  const int blocks = BlockTable::blocks_for(static_cast<std::int64_t>(prompt.size()) + 1, kv_.block_size());
  if (blocks > kv_.usage().num_blocks)
    fail("the prompt has {} tokens but the KV cache holds only {} blocks of {}; give the cache more memory",
         prompt.size(), kv_.usage().num_blocks, kv_.block_size());
  SequenceState s;
  s.id = id;
  s.num_prompt_tokens = static_cast<int>(prompt.size());
  s.tokens = std::move(prompt);
  s.priority = priority;
  s.arrival = next_arrival_++;
  s.cache_salt = std::move(cache_salt);
  s.prompt_logits = prompt_logits;
  sequences_.emplace(id, std::move(s));
  enqueue_waiting(id, /*front=*/false);
}

void Scheduler::enqueue_waiting(SequenceId id, bool front) {
  SequenceState& s = state(id);
  s.status = SequenceStatus::kWaiting;
  if (config_.policy == SchedulingPolicy::kFcfs) {
    if (front) {
      waiting_.push_front(id);
    } else {
      waiting_.push_back(id);
    }
    return;
  }
  // Priority order: (priority, arrival) ascending; a preempted sequence keeps
  // its arrival, so it returns to its place.
  auto key = [this](SequenceId r) {
    const SequenceState& q = sequences_.at(r);
    return std::pair(q.priority, q.arrival);
  };
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), id,
                              [&](SequenceId a, SequenceId b) { return key(a) < key(b); });
  waiting_.insert(pos, id);
}

void Scheduler::fork(SequenceId parent_id, SequenceId child_id) {
  if (sequences_.contains(child_id)) fail("scheduler: sequence {} already exists", child_id);
  SequenceState& parent = state(parent_id);
  FOLIO_CHECK(parent.status == SequenceStatus::kRunning && parent.num_output_tokens() == 0 &&
              parent.num_computed_tokens == parent.num_tokens());
  SequenceState child = parent;
  child.id = child_id;
  child.num_preemptions = 0;
  // The child runs at once only within the sequence cap.
  std::optional<std::vector<BlockCopy>> copies;
  if (static_cast<int>(running_.size()) < config_.max_num_seqs) copies = kv_.fork(parent_id, child_id);
  if (copies) {
    pending_copies_.insert(pending_copies_.end(), copies->begin(), copies->end());
    // It joins running_ next to its parent (after earlier siblings), not at
    // the back: it is as old as the parent, so it decodes before, and is
    // preempted after, any prefill admitted since.
    auto pos = std::find(running_.begin(), running_.end(), parent_id) + 1;
    while (pos != running_.end() && sequences_.at(*pos).arrival == child.arrival) ++pos;
    running_.insert(pos, child_id);
    sequences_.emplace(child_id, std::move(child));
    return;
  }
  child.num_computed_tokens = 0;
  child.num_cached_tokens = -1;
  child.arrival = next_arrival_++;
  sequences_.emplace(child_id, std::move(child));
  enqueue_waiting(child_id, /*front=*/false);
}

std::size_t Scheduler::victim_index() const {
  std::size_t victim = running_.size() - 1;
  if (config_.policy == SchedulingPolicy::kPriority) {
    for (std::size_t i = 0; i < running_.size(); ++i) {
      const SequenceState& a = sequences_.at(running_[i]);
      const SequenceState& b = sequences_.at(running_[victim]);
      if (std::pair(a.priority, a.arrival) > std::pair(b.priority, b.arrival)) victim = i;
    }
  }
  return victim;
}

void Scheduler::drop_drafts(SequenceState& s, int count) {
  count = std::min(count, s.num_draft_tokens);
  s.tokens.resize(s.tokens.size() - static_cast<std::size_t>(count));
  s.num_draft_tokens -= count;
}

std::vector<SequenceId> Scheduler::decode_candidates() const {
  std::vector<SequenceId> out;
  for (SequenceId id : running_) {
    const SequenceState& s = sequences_.at(id);
    if (s.num_draft_tokens == 0 && s.num_output_tokens() > 0 && s.num_computed_tokens == s.num_tokens() - 1)
      out.push_back(id);
  }
  return out;
}

void Scheduler::propose(SequenceId id, std::span<const TokenId> draft) {
  SequenceState& s = state(id);
  FOLIO_CHECK(s.status == SequenceStatus::kRunning && s.num_draft_tokens == 0 &&
              s.num_computed_tokens == s.num_tokens() - 1);
  // Room for the proposals and the token verification adds after them.
  const int room = std::max(0, config_.max_model_len - 1 - s.num_tokens());
  const int k = std::min(static_cast<int>(draft.size()), room);
  s.tokens.insert(s.tokens.end(), draft.begin(), draft.begin() + k);
  s.num_draft_tokens = k;
}

void Scheduler::preempt(std::size_t index, StepPlan& plan) {
  const SequenceId id = running_[index];
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  SequenceState& s = state(id);
  drop_drafts(s, s.num_draft_tokens);  // unverified: recomputation starts from verified tokens
  kv_.free(id);
  s.num_computed_tokens = 0;
  ++s.num_preemptions;
  ++num_preemptions_;
  plan.preempted.push_back(id);
  enqueue_waiting(id, /*front=*/true);
}

namespace {

// The most tokens a sequence may feed this step: the step's token budget,
// and for one that wants prompt logits the logit rows left too.
int chunk_cap(const SequenceState& s, int budget, int logit_budget) {
  return s.prompt_logits ? std::min(budget, logit_budget) : budget;
}

}  // namespace

bool Scheduler::try_admit(SequenceState& s, int& budget, int& logit_budget, StepPlan& plan) {
  PrefixHit hit = kv_.find_cached_prefix(s.tokens, s.cache_salt, /*read_cache=*/!s.prompt_logits);
  const int computed = hit.num_computed_tokens;
  int n = s.num_tokens() - computed;
  const int cap = chunk_cap(s, budget, logit_budget);
  if (n > cap) {
    // Prompt logits are chunked even without chunked prefill (chunks never
    // change an output): a step has only so many logit rows.
    if ((!config_.enable_chunked_prefill && !s.prompt_logits) || cap == 0) return false;
    n = cap;
  }
  if (!kv_.allocate_slots(s.id, n, hit)) return false;
  if (s.prompt_logits) logit_budget -= n;
  s.num_computed_tokens = computed;
  if (s.num_cached_tokens < 0) s.num_cached_tokens = std::min(computed, s.num_prompt_tokens);
  s.status = SequenceStatus::kRunning;
  running_.push_back(s.id);
  plan.sequences.push_back({s.id, computed, n, computed + n == s.num_tokens(), 0, 0, s.prompt_logits});
  plan.num_tokens += n;
  budget -= n;
  return true;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  plan.block_copies = std::move(pending_copies_);
  pending_copies_.clear();
  int budget = config_.max_num_batched_tokens;
  int logit_budget = config_.max_prompt_logit_tokens;

  // Running sequences first, in admission order; each feeds what it has not
  // fed yet (one decode token, or the next prefill chunk).
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    SequenceState& s = state(running_[i]);
    // Proposals that do not fit the budget, or the pool, are dropped first:
    // speculation never costs anyone else their place.
    if (s.num_draft_tokens > 0) {
      const int over = s.num_tokens() - s.num_computed_tokens - budget;
      if (over > 0) drop_drafts(s, over);
      if (s.num_draft_tokens > 0 && !kv_.allocate_slots(s.id, s.num_tokens() - s.num_computed_tokens))
        drop_drafts(s, s.num_draft_tokens);
      else if (s.num_draft_tokens > 0) {
        const int n = s.num_tokens() - s.num_computed_tokens;
        plan.sequences.push_back({s.id, s.num_computed_tokens, n, true, s.num_draft_tokens, 0});
        plan.num_tokens += n;
        budget -= n;
        continue;
      }
    }
    int n = std::min(s.num_tokens() - s.num_computed_tokens, chunk_cap(s, budget, logit_budget));
    if (n <= 0) continue;
    bool scheduled = true;
    while (!kv_.allocate_slots(s.id, n)) {
      const std::size_t victim = victim_index();
      const bool self = running_[victim] == s.id;
      // A victim scheduled earlier in this step leaves the plan again.
      auto planned = std::find_if(plan.sequences.begin(), plan.sequences.end(),
                                  [&](const ScheduledSequence& q) { return q.id == running_[victim]; });
      if (planned != plan.sequences.end()) {
        budget += planned->num_new_tokens;
        if (planned->prompt_logits) logit_budget += planned->num_new_tokens;
        plan.num_tokens -= planned->num_new_tokens;
        plan.sequences.erase(planned);
      }
      preempt(victim, plan);
      if (self) {
        scheduled = false;
        break;
      }
      if (victim < i) --i;
    }
    if (!scheduled) {
      --i;  // running_[i] was removed; the loop's ++i visits the next one
      continue;
    }
    plan.sequences.push_back(
        {s.id, s.num_computed_tokens, n, s.num_computed_tokens + n == s.num_tokens(), 0, 0, s.prompt_logits});
    plan.num_tokens += n;
    budget -= n;
    if (s.prompt_logits) logit_budget -= n;
  }

  // Proposals of sequences the budget left out this step are dropped: they
  // live for exactly one step.
  for (SequenceId id : running_) {
    SequenceState& s = state(id);
    if (s.num_draft_tokens == 0) continue;
    const bool planned = std::any_of(plan.sequences.begin(), plan.sequences.end(),
                                     [&](const ScheduledSequence& q) { return q.id == id; });
    if (!planned) drop_drafts(s, s.num_draft_tokens);
  }

  // Then waiting sequences, in queue order, while the budget, the sequence
  // cap and the pool allow; none when someone was just preempted (memory is
  // short) so that preempted work is not starved by newcomers.
  if (plan.preempted.empty()) {
    while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < config_.max_num_seqs) {
      SequenceState& s = state(waiting_.front());
      if (!try_admit(s, budget, logit_budget, plan)) break;
      waiting_.pop_front();
    }
  }
  return plan;
}

void Scheduler::append_token(SequenceId id, TokenId token) {
  SequenceState& s = state(id);
  FOLIO_CHECK(s.status == SequenceStatus::kRunning);
  s.tokens.push_back(token);
}

void Scheduler::complete_step(const StepPlan& plan) {
  for (const ScheduledSequence& q : plan.sequences) {
    auto it = sequences_.find(q.id);
    if (it == sequences_.end()) continue;  // finished while the step ran
    SequenceState& s = it->second;
    if (q.num_draft_tokens > 0) {
      FOLIO_CHECK(q.num_rejected >= 0 && q.num_rejected <= q.num_draft_tokens);
      if (q.num_rejected > 0) {
        drop_drafts(s, q.num_rejected);
        kv_.rollback(s.id, q.num_rejected);
      }
      s.num_draft_tokens = 0;  // the rest were accepted: verified from now on
    }
    s.num_computed_tokens = q.num_computed_tokens + q.num_new_tokens - q.num_rejected;
    if (s.num_computed_tokens >= s.num_prompt_tokens) s.prompt_logits = false;
    // Everything with KV written is verified: commit it so full blocks become hits.
    kv_.commit(s.id, std::span<const TokenId>(s.tokens).first(static_cast<std::size_t>(s.num_computed_tokens)));
  }
}

bool Scheduler::finish(SequenceId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return false;
  if (it->second.status == SequenceStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
  } else if (it->second.status == SequenceStatus::kWaiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
  }
  if (kv_.contains(id)) kv_.free(id);
  sequences_.erase(it);
  return true;
}

}  // namespace folio
