// Engine: serves many requests at once with one forward pass per step. It
// owns its loop on its own thread; submit() and abort() are thread-safe and
// each request gets a RequestStream of outputs. Each step: propose, schedule,
// prepare the runner's inputs, run the model once over every scheduled
// sequence, choose tokens, complete, emit, then publish - the stats under
// one lock and each touched request's output to its stream.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/engine_stats.h"
#include "engine/model_runner.h"
#include "engine/model_session.h"
#include "engine/kv_event_sink.h"
#include "engine/request.h"
#include "engine/request_stream.h"
#include "engine/sampling_rows.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/speculative/proposer.h"
#include "engine/speculative/speculation_controller.h"
#include "engine/speculative/speculative_config.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_storage.h"
#include "tensor/kv_dtype.h"

namespace folio {

struct EngineConfig {
  int max_num_batched_tokens = 512;   // tokens per forward pass
  int max_num_seqs = 64;              // sequences per forward pass
  int max_model_len = 0;              // 0: the model's context, capped by the KV pool
  std::uint64_t kv_cache_bytes = 2ull << 30;  // KV pool budget (K and V, all layers)
  std::int64_t kv_num_blocks = 0;     // > 0 overrides kv_cache_bytes (tests)
  KvCacheDType kv_dtype;              // K and V cache types (f16 both by default)
  int block_size = kDefaultBlockSize;
  bool enable_prefix_caching = true;
  bool enable_chunked_prefill = true;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  int max_waiting = 1024;             // submit() refuses beyond this many waiting requests
  SpeculativeConfig speculative;
  // Round each step's token count up to a few fixed sizes (ModelRunner), as
  // a CUDA graph needs; padding changes no output. Off on the CPU, where it
  // would only cost time.
  bool pad_to_buckets = false;
  // The host reference path: every step's logits come back to the host and
  // the host Sampler (and verify_draft) choose the tokens. Tests compare the
  // device sampling with it; it moves a vocabulary of floats per row.
  bool host_sampling = false;
  // KV events (BlockStored, BlockRemoved) go here after each step when set;
  // without one the prefix cache logs nothing.
  std::shared_ptr<KvEventSink> kv_events;
};

// Why submit() refused: the server maps these to HTTP statuses.
class EngineError : public Error {
 public:
  enum class Kind { kInvalid, kBusy, kDraining };
  EngineError(Kind kind, const std::string& message) : Error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class Engine {
 public:
  Engine(std::shared_ptr<ModelSession> session, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request; throws EngineError (kInvalid with a
  // message for the client, kBusy when the queue is full, kDraining).
  std::shared_ptr<RequestStream> submit(EngineRequest request);
  // Ends a request in any state within one step; its blocks are freed.
  void abort(RequestId request_id);
  // Refuses new requests, lets running ones finish for up to `timeout`, then
  // aborts the rest. Returns true when everything finished in time.
  bool drain(std::chrono::milliseconds timeout);

  EngineStats stats() const;
  // The KV pool, one character a block (kv/block_map.h): copied after a step
  // at most every 100 ms, and always when the engine falls idle. `usage`, when
  // given, gets the pool's counts at that same moment (stats().kv may be newer).
  std::string kv_block_map(KvUsage* usage = nullptr) const;
  const ModelSession& session() const { return *session_; }
  const EngineConfig& config() const { return config_; }
  int max_model_len() const { return config_.max_model_len; }

 private:
  using Clock = std::chrono::steady_clock;

  // The engine's record of one request. Each of its n completions is a
  // sequence, known by its SequenceId to three pure-logic records: its
  // Sequence here (sampling and output), the Scheduler's SequenceState
  // (tokens and progress) and the KvCacheManager's blocks.
  struct RequestEntry {
    std::shared_ptr<RequestStream> stream;
    EngineRequest request;
    std::vector<std::unique_ptr<Sequence>> completions;  // [n]
    std::vector<SequenceId> sequence_ids;                // [n] completion i's sequence
    bool forked = false;
    int num_finished = 0;
    Usage usage;
    Clock::time_point arrival;
    Clock::time_point first_scheduled{};
    Clock::time_point first_token{};
    Clock::time_point last_token{};
    bool scheduled = false;
    std::vector<PromptTokenLogprob> prompt_logprobs;  // prompt_logprobs: collected so far
    bool prompt_logprobs_sent = false;
  };

  // One step's inputs as the runner takes them (its sampling rows are in
  // sampling_), and where each scheduled sequence's rows are.
  struct StepInputs {
    std::vector<SequenceChunk> chunks;       // [sequences]
    std::vector<std::int32_t> first_logits;  // [sequences] a sampled sequence's first logits row; -1 if none
    std::vector<std::size_t> first_row;      // [sequences] its first sampling row
    std::vector<std::pair<std::size_t, std::int32_t>> prompt_rows;  // prompt_logprobs: (sequence, first logits row)
    std::int64_t prompt_tokens_run = 0;      // prompt tokens fed this step
    bool decode_only = true;                 // every sequence feeds its last token and any proposals
  };

  void loop();
  void admit(RequestId id, RequestEntry entry);
  void step();
  void propose_drafts();
  // The scheduler's plan, with preempted sequences forgotten by speculation
  // and first-scheduled requests timed.
  StepPlan schedule();
  // Copy-on-write of forked partial blocks, before the forward pass reads them.
  void copy_forked_blocks(const StepPlan& plan);
  // Each sequence's chunk and logits rows, and the sampling rows (with token
  // masks) of those that sample on the device, in chunk order.
  const StepInputs& prepare_inputs(const StepPlan& plan);
  // The step's logits on the host when host sampling or prompt_logprobs need
  // them (prompt_logprobs collected here); null when host sampling is off.
  const float* logits_on_host(const StepPlan& plan);
  // Every sampled sequence's tokens (verifying proposals), before
  // complete_step rolls rejected proposals back.
  std::vector<std::vector<SampledToken>> choose_tokens(StepPlan& plan, const StepSamples& samples,
                                                       const float* host_logits);
  // The scheduler takes the step's tokens (and rolls rejected proposals
  // back); the step is counted.
  void complete(const StepPlan& plan);
  // The tokens chosen for a sampled sequence this step: one sampled token, or
  // accepted proposals plus one; sets num_rejected of a speculating entry.
  // From the device's samples (first_row: the sequence's first sampling
  // row), or on the host from its rows of logits (host_sampling).
  std::vector<SampledToken> read_tokens(ScheduledSequence& q, const StepSamples& samples, std::size_t first_row);
  std::vector<SampledToken> choose_tokens_on_host(ScheduledSequence& q, const float* logits);
  void count_speculation(ScheduledSequence& q, int num_accepted);
  // The sequence finished or was preempted: the proposer and the controller forget it.
  void forget_speculation(SequenceId id);
  // Hybrid models (a recurrent state per sequence).
  void refuse_unsupported_with_state(const ModelConfig& model);
  std::int64_t state_slot(SequenceId id, int num_computed_tokens);
  void release_state_slots(const StepPlan& plan);
  // n > 1: the other completions of requests whose prompt this step
  // finished share it, and sample their first token from the same logits.
  void fork_completions(const StepPlan& plan, const float* host_logits);
  void sample_forks(const std::vector<std::pair<std::size_t, std::int32_t>>& parents, const StepPlan& plan,
                    const float* host_logits);
  // Each sampled sequence's chosen tokens to its Sequence (stop strings,
  // detokenizing), then the outputs of every request that got tokens.
  void emit(const StepPlan& plan, const std::vector<std::vector<SampledToken>>& chosen);
  void emit_tokens(RequestId request_id, int index, std::span<const SampledToken> tokens, bool speculated);
  // The outputs of the requests that got tokens this step, with their time
  // to first token or between tokens.
  void queue_touched_outputs();
  // prompt_logprobs of the prompt tokens a chunk's logits rows predict
  // (logits: its first row on the host).
  void collect_prompt_logprobs(const ScheduledSequence& q, const float* logits);
  // A constrained sequence's token masks for rows first_row .. of sampling_
  // (the device path): appended to sampling_.masks, timed in the stats.
  void attach_masks(Sequence& seq, std::span<const TokenId> draft, std::size_t first_row);
  // The same masks into host_masks_ (the host path); empty when unconstrained.
  std::span<const std::uint32_t> host_masks(Sequence& seq, std::span<const TokenId> draft);
  void time_masks(std::chrono::steady_clock::time_point start, std::size_t num_masks);
  void finish_request(RequestId id, FinishReason reason);
  // The request's output so far into the outbox; a finished request leaves
  // the engine's records.
  void queue_output(RequestId id, RequestEntry& r);
  // The end of each turn of the loop: the stats (counts and gauges) under
  // one lock, then the outbox to the streams, then the finished requests
  // leave the queue count.
  void publish();
  void refresh_gauges();  // under stats_mutex_
  void copy_block_map();  // under stats_mutex_

  // Which request and completion a sequence is, and back.
  struct SequenceOwner {
    RequestId request;
    int index;
  };
  SequenceId sequence_id(RequestId request, int index) const {
    return requests_.at(request).sequence_ids[static_cast<std::size_t>(index)];
  }
  RequestId request_of(SequenceId seq) const { return owners_.at(seq).request; }
  int index_of(SequenceId seq) const { return owners_.at(seq).index; }
  Sequence& sequence(SequenceId seq) {
    const SequenceOwner& o = owners_.at(seq);
    return *requests_.at(o.request).completions[static_cast<std::size_t>(o.index)];
  }

  std::shared_ptr<ModelSession> session_;
  EngineConfig config_;
  std::unique_ptr<KvStorage> kv_storage_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<StateStorage> state_storage_;  // hybrid models only
  std::unordered_map<SequenceId, std::int64_t> state_slots_;  // running sequence -> its slot
  std::unique_ptr<ModelRunner> runner_;
  Sampler sampler_;
  std::unique_ptr<Proposer> proposer_;
  std::unique_ptr<SpeculationController> speculation_;  // with proposer_
  std::vector<float> verify_scratch_;
  StepInputs inputs_;
  SamplingRequest sampling_;
  std::vector<LogitAdjustment> adjustment_scratch_;
  std::vector<float> host_logits_;
  std::vector<std::uint32_t> host_masks_;

  // Engine-thread state.
  std::unordered_map<RequestId, RequestEntry> requests_;
  std::unordered_map<SequenceId, SequenceOwner> owners_;
  std::unordered_set<RequestId> touched_;  // got tokens this step
  StepCounts counts_;                      // since the last publish
  std::vector<std::pair<std::shared_ptr<RequestStream>, RequestOutput>> outbox_;
  int num_finished_in_outbox_ = 0;
  std::uint64_t unseeded_counter_ = 0;
  SequenceId next_sequence_id_ = 1;

  // Shared with submitters.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::pair<RequestId, RequestEntry>> inbox_;
  std::vector<RequestId> aborts_;
  RequestId next_request_id_ = 1;
  int num_queued_ = 0;  // submitted, not yet finished
  bool stop_ = false;
  bool draining_ = false;
  std::condition_variable idle_;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  std::string block_map_;
  KvUsage block_map_usage_;
  Clock::time_point block_map_time_{};

  std::thread thread_;
};

}  // namespace folio
