// Scheduler: which sequences run in the next step and how many tokens each
// feeds, under a token budget and a sequence cap. Running sequences go first
// (decodes and unfinished prefill chunks), then waiting ones are admitted while
// their blocks fit; when the pool runs dry the lowest-priority, most recently
// admitted sequence is preempted (its blocks freed, recomputed later, prefix
// hits reused). Pure logic over the KvCacheManager: no tensors, threads or
// clocks. Invariant: a running sequence holds slots for every token it has fed.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace folio {

enum class SchedulingPolicy { kFcfs, kPriority };

struct SchedulerConfig {
  int max_num_batched_tokens = 512;  // tokens fed per step, all sequences together
  int max_num_seqs = 64;             // sequences per step
  int max_model_len = 2048;          // most tokens (prompt + output) of a sequence
  bool enable_chunked_prefill = true;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // Prompt tokens per step, all sequences together, fed by sequences that
  // want logits at every prompt position (prompt logprobs): the logit rows
  // the step has to spare for them.
  int max_prompt_logit_tokens = 128;
};

enum class SequenceStatus { kWaiting, kRunning, kFinished };

// What the scheduler knows of one sequence.
struct SequenceState {
  SequenceId id = 0;
  std::vector<TokenId> tokens;   // prompt, then output
  int num_prompt_tokens = 0;
  int num_computed_tokens = 0;   // tokens whose KV is in the cache
  int num_cached_tokens = -1;    // prompt tokens served by the prefix cache at first admission (-1: not yet)
  int priority = 0;              // lower runs first under kPriority
  std::uint64_t arrival = 0;     // order of arrival, for FCFS and ties
  std::string cache_salt;
  // Logits at every prompt position are wanted: the prompt is computed, not
  // read from the prefix cache, in chunks within max_prompt_logit_tokens.
  // Cleared once the prompt is computed (a recompute after preemption does
  // not want them again).
  bool prompt_logits = false;
  SequenceStatus status = SequenceStatus::kWaiting;
  int num_preemptions = 0;
  int num_draft_tokens = 0;      // the last tokens are unverified proposals (speculative decoding)

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
};

// One sequence's part of a step: feed tokens[num_computed_tokens,
// num_computed_tokens + num_new_tokens); sample when that reaches the end.
// With num_draft_tokens > 0 the last that many fed tokens are proposals: the
// step needs logits for num_draft_tokens + 1 rows, and before complete_step
// the engine sets num_rejected to the proposals verification turned down.
struct ScheduledSequence {
  SequenceId id = 0;
  int num_computed_tokens = 0;
  int num_new_tokens = 0;
  bool sample = false;
  int num_draft_tokens = 0;
  int num_rejected = 0;
  bool prompt_logits = false;  // logits for every fed token (all of them prompt tokens)
};

struct StepPlan {
  std::vector<ScheduledSequence> sequences;
  std::vector<SequenceId> preempted;      // moved back to waiting this step
  // Forks' partial blocks: perform in this order before the forward pass. A
  // block freed since its fork may appear again as a later copy's dst, so the
  // copies are not independent of each other.
  std::vector<BlockCopy> block_copies;
  int num_tokens = 0;

  bool empty() const { return sequences.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  // Queues a new sequence. Throws Error when it can never run: its prompt is
  // empty, longer than max_model_len, or needs more blocks than the pool has.
  void add(SequenceId id, std::vector<TokenId> prompt, int priority = 0, std::string cache_salt = {},
           bool prompt_logits = false);

  // A new sequence sharing `parent`'s computed prompt (n > 1 sampling): it
  // runs at once with a fork of the parent's blocks (the block copies join
  // the next plan). When no block is free for the copy, or max_num_seqs are
  // running, it queues as a new sequence instead (no token can be appended
  // to it then) and will find the prompt in the prefix cache. The parent
  // must have just finished its prefill (no output yet).
  void fork(SequenceId parent, SequenceId child);

  // Running sequences about to decode one token (everything fed but the last
  // token), in admission order: the ones that may speculate.
  std::vector<SequenceId> decode_candidates() const;
  // Appends proposed tokens to a decode candidate; the next step feeds them
  // with its last token and asks for logits of every one. Capped so that the
  // sequence stays within max_model_len; dropped again if the step's budget
  // or the pool cannot take them (speculation never preempts anyone).
  void propose(SequenceId id, std::span<const TokenId> draft);

  StepPlan schedule();

  // After the forward pass of `plan`: every scheduled sequence has its new
  // tokens' KV written; rejected proposals are rolled back (their tokens
  // and slots dropped), and complete_step commits the rest to the prefix
  // cache. Then the sequences whose plan said sample append the token the
  // engine chose, forks are made and finished sequences leave.
  void complete_step(const StepPlan& plan);
  void append_token(SequenceId id, TokenId token);

  // Ends a sequence in any state (finished, aborted) and frees its blocks.
  // Returns false when it is unknown.
  bool finish(SequenceId id);

  const SequenceState* find(SequenceId id) const;
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  std::int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  SequenceState& state(SequenceId id);
  // The running sequence to preempt first: lowest priority, then latest arrival.
  std::size_t victim_index() const;
  void preempt(std::size_t running_index, StepPlan& plan);
  void enqueue_waiting(SequenceId id, bool front);
  void drop_drafts(SequenceState& s, int count);
  bool try_admit(SequenceState& s, int& budget, int& logit_budget, StepPlan& plan);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::unordered_map<SequenceId, SequenceState> sequences_;
  std::deque<SequenceId> waiting_;
  std::vector<SequenceId> running_;   // in admission order; a fork child next to its parent
  std::vector<BlockCopy> pending_copies_;
  std::uint64_t next_arrival_ = 0;
  std::int64_t num_preemptions_ = 0;
};

}  // namespace folio
