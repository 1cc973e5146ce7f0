#include "engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "engine/speculative/draft_model_proposer.h"
#include "engine/speculative/ngram_proposer.h"
#include "engine/speculative/verifier.h"
#include "kv/block_map.h"
#include "model/rotary.h"

namespace folio {
namespace {

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Engine::Engine(std::shared_ptr<ModelSession> session, const EngineConfig& config)
    : session_(std::move(session)), config_(config) {
  const ModelConfig& model = session_->config();
  if (config_.max_model_len <= 0) config_.max_model_len = static_cast<int>(model.context_length);
  const bool hybrid = !model.recurrent_layers.empty();
  if (hybrid) refuse_unsupported_with_state(model);
  if (config_.max_model_len > model.context_length)
    fail("--max-model-len {} is beyond the {} tokens model {} supports ({}); lower --max-model-len", config_.max_model_len,
         model.context_length, model.name, context_limit_reason(model));

  KvStorageOptions kv_options;
  kv_options.block_size = config_.block_size;
  kv_options.dtype = config_.kv_dtype;
  std::int64_t blocks = config_.kv_num_blocks;
  // A hybrid model's state cache: one slot per running sequence (n > 1 is
  // refused, so no fork needs one), its bytes taken from the KV budget.
  const std::uint64_t state_bytes = hybrid ? StateStorage::bytes_for(model, config_.max_num_seqs) : 0;
  if (blocks <= 0) {
    if (state_bytes >= config_.kv_cache_bytes)
      fail("the recurrent state of {} sequences takes {} bytes, all of the KV cache budget of {}; lower "
           "--max-num-seqs or give the cache more memory",
           config_.max_num_seqs, state_bytes, config_.kv_cache_bytes);
    blocks = KvStorage::blocks_for_budget(model, config_.block_size, config_.kv_dtype,
                                          config_.kv_cache_bytes - state_bytes);
    // No use for more blocks than every sequence at full length needs.
    const std::int64_t per_seq = (config_.max_model_len + config_.block_size - 1) / config_.block_size;
    blocks = std::min<std::int64_t>(blocks, per_seq * config_.max_num_seqs);
  }
  if (blocks * config_.block_size < config_.max_model_len) {
    const int fit = static_cast<int>(blocks * config_.block_size);
    if (fit < 2) fail("the KV cache budget holds no block for this model; give it more memory");
    std::fprintf(stderr, "folio: the KV cache holds %d tokens; max model length lowered from %d to %d\n", fit,
                 config_.max_model_len, fit);
    config_.max_model_len = fit;
  }
  kv_options.num_blocks = blocks;
  kv_storage_ = std::make_unique<KvStorage>(*session_->backend, model, kv_options);

  KvCacheConfig cache;
  cache.num_blocks = static_cast<int>(blocks);
  cache.block_size = config_.block_size;
  cache.enable_prefix_caching = config_.enable_prefix_caching;
  kv_ = std::make_unique<KvCacheManager>(cache);
  if (config_.kv_events) kv_->record_events(true);

  SchedulerConfig sched;
  sched.max_num_batched_tokens = config_.max_num_batched_tokens;
  sched.max_num_seqs = config_.max_num_seqs;
  sched.max_model_len = config_.max_model_len;
  sched.enable_chunked_prefill = config_.enable_chunked_prefill;
  sched.policy = config_.policy;
  // The runner's logit rows beyond one sampled row set per running sequence
  // (forks of n > 1 sample from their parent's rows).
  sched.max_prompt_logit_tokens = kMaxCompletions;
  scheduler_ = std::make_unique<Scheduler>(sched, *kv_);

  const SpeculativeConfig& spec = config_.speculative;
  int logits_per_seq = 1;
  if (spec.method != SpeculativeConfig::Method::kNone) {
    if (spec.num_tokens < 1 || spec.num_tokens > 16)
      fail("--num-speculative-tokens must be 1 to 16, got {}", spec.num_tokens);
    logits_per_seq = spec.num_tokens + 1;
    if (spec.method == SpeculativeConfig::Method::kNgram) {
      proposer_ = std::make_unique<NgramProposer>(spec.ngram_min, spec.ngram_max);
    } else {
      proposer_ = make_draft_model_proposer(*session_, spec, config_.max_num_seqs, config_.max_model_len,
                                             config_.kv_dtype);
    }
    speculation_ = std::make_unique<SpeculationController>(spec.num_tokens, spec.adaptive);
  }
  // Forks of n > 1 requests can run beside max_num_seqs others.
  const std::int64_t max_seqs = config_.max_num_seqs + kMaxCompletions;
  RunnerOptions runner;
  runner.max_num_batched_tokens = config_.max_num_batched_tokens;
  runner.max_num_seqs = max_seqs;
  runner.max_logits = max_seqs * logits_per_seq;
  runner.pad_to_buckets = config_.pad_to_buckets;
  runner.max_model_len = config_.max_model_len;
  if (hybrid) state_storage_ = std::make_unique<StateStorage>(*session_->backend, model, config_.max_num_seqs);
  runner_ = std::make_unique<ModelRunner>(*session_->backend, *session_->loaded.model, *kv_storage_, runner,
                                          state_storage_.get());
  {
    std::lock_guard lock(stats_mutex_);
    stats_.kv_bytes = kv_storage_->total_bytes();
    if (state_storage_) {
      stats_.state_bytes = state_storage_->total_bytes();
      stats_.state_slots = state_storage_->num_slots();
    }
    refresh_gauges();  // the pool's size is known before the first step (GET /metrics)
  }
  thread_ = std::thread([this] { loop(); });
}

// What a recurrent state per sequence does not support yet, refused or
// turned off at start-up with the reason, never run into wrong output.
void Engine::refuse_unsupported_with_state(const ModelConfig& model) {
  if (config_.speculative.method != SpeculativeConfig::Method::kNone)
    fail("model {} keeps a recurrent state per sequence (linear attention), and speculative decoding does not yet "
         "roll that state back past rejected tokens; start it without --speculative",
         model.name);
  if (config_.enable_prefix_caching) {
    // A prefix-cache hit would skip the tokens whose state the linear
    // layers need; snapshots of the state at block boundaries are not kept.
    std::fprintf(stderr, "folio: model %s keeps a recurrent state per sequence; prefix caching is off for it\n",
                 model.name.c_str());
    config_.enable_prefix_caching = false;
  }
}

// A running sequence's state slot, taken on its first step, which starts at
// position 0 (a later one would read a state nobody wrote). Slots of
// sequences that were preempted (they restart from position 0) or are gone
// are given back first.
std::int64_t Engine::state_slot(SequenceId id, int num_computed_tokens) {
  auto it = state_slots_.find(id);
  if (it != state_slots_.end()) return it->second;
  FOLIO_CHECK(num_computed_tokens == 0);
  const std::int64_t slot = state_storage_->acquire();
  FOLIO_CHECK(slot >= 0);  // max_num_seqs slots for at most max_num_seqs running sequences
  state_slots_.emplace(id, slot);
  return slot;
}

void Engine::release_state_slots(const StepPlan& plan) {
  for (SequenceId id : plan.preempted) {
    auto it = state_slots_.find(id);
    if (it == state_slots_.end()) continue;
    state_storage_->release(it->second);
    state_slots_.erase(it);
  }
  for (auto it = state_slots_.begin(); it != state_slots_.end();) {
    if (scheduler_->find(it->first) != nullptr) {
      ++it;
      continue;
    }
    state_storage_->release(it->second);
    it = state_slots_.erase(it);
  }
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<RequestStream> Engine::submit(EngineRequest request) {
  if (auto problem = check_request(request.prompt, request.params, session_->config().vocab_size,
                                   config_.max_model_len))
    throw EngineError(EngineError::Kind::kInvalid, problem->message);
  if (state_storage_ && request.params.n > 1)
    throw EngineError(EngineError::Kind::kInvalid,
                      fmt::format("n = {} is not supported for model {} yet: it keeps a recurrent state per sequence, "
                                  "which completions cannot fork from; ask for n = 1 and send the request again",
                                  request.params.n, session_->config().name));

  std::lock_guard lock(mutex_);
  if (draining_ || stop_) throw EngineError(EngineError::Kind::kDraining, "the server is shutting down");
  if (num_queued_ >= config_.max_waiting)
    throw EngineError(EngineError::Kind::kBusy,
                      fmt::format("{} requests are already queued; try again later", num_queued_));
  const RequestId id = next_request_id_++;
  RequestEntry state;
  state.stream = std::make_shared<RequestStream>(id);
  state.request = std::move(request);
  state.arrival = Clock::now();
  auto stream = state.stream;
  inbox_.emplace_back(id, std::move(state));
  ++num_queued_;
  wake_.notify_all();
  return stream;
}

void Engine::abort(RequestId request_id) {
  {
    std::lock_guard lock(mutex_);
    aborts_.push_back(request_id);
  }
  wake_.notify_all();
}

bool Engine::drain(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  if (idle_.wait_for(lock, timeout, [this] { return num_queued_ == 0; })) return true;
  // Time is up: abort whatever is left and wait for the engine to let go of it.
  for (const auto& [id, state] : inbox_) aborts_.push_back(id);
  aborts_.push_back(0);  // 0: every request
  wake_.notify_all();
  idle_.wait(lock, [this] { return num_queued_ == 0; });
  return false;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void Engine::loop() {
  for (;;) {
    std::vector<std::pair<RequestId, RequestEntry>> incoming;
    std::vector<RequestId> aborts;
    bool stopping;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !inbox_.empty() || !aborts_.empty() || scheduler_->has_work(); });
      incoming.swap(inbox_);
      aborts.swap(aborts_);
      stopping = stop_;
    }
    for (auto& [id, state] : incoming) admit(id, std::move(state));
    for (RequestId id : aborts) {
      if (id != 0) {
        finish_request(id, FinishReason::kAbort);
        continue;
      }
      std::vector<RequestId> all;
      for (const auto& [rid, r] : requests_) all.push_back(rid);
      for (RequestId rid : all) finish_request(rid, FinishReason::kAbort);
    }
    // Aborted and refused requests hear so now, not after the step.
    if (!outbox_.empty()) publish();
    if (stopping) {
      std::vector<RequestId> all;
      for (const auto& [rid, r] : requests_) all.push_back(rid);
      for (RequestId rid : all) finish_request(rid, FinishReason::kAbort);
      publish();
      return;
    }
    step();
    if (config_.kv_events) {
      std::vector<KvEvent> events = kv_->take_events();
      if (!events.empty()) config_.kv_events->publish(std::move(events));
    }
  }
}

void Engine::admit(RequestId id, RequestEntry state) {
  const EngineRequest& req = state.request;
  const int n = req.params.n;
  for (int i = 0; i < n; ++i) {
    std::optional<std::int64_t> seed = req.params.seed;
    if (seed) *seed += i;  // each completion its own stream, reproducible
    state.completions.push_back(std::make_unique<Sequence>(*session_->tokenizer, req.params, req.prompt, i,
                                                           SamplingRng::for_request(seed, unseeded_counter_++)));
    state.sequence_ids.push_back(next_sequence_id_++);
  }
  state.usage.prompt_tokens = static_cast<int>(req.prompt.size());
  try {
    scheduler_->add(state.sequence_ids[0], req.prompt, req.priority, req.cache_salt,
                    /*prompt_logits=*/req.params.prompt_logprobs.has_value());
  } catch (const Error& e) {
    RequestOutput out;
    out.finished = true;
    out.error = e.what();
    outbox_.emplace_back(state.stream, std::move(out));
    ++num_finished_in_outbox_;
    return;
  }
  counts_.prompt_tokens += static_cast<std::int64_t>(req.prompt.size());
  for (int i = 0; i < n; ++i) owners_.emplace(state.sequence_ids[static_cast<std::size_t>(i)], SequenceOwner{id, i});
  requests_.emplace(id, std::move(state));
}

void Engine::propose_drafts() {
  const std::vector<SequenceId> decoding = scheduler_->decode_candidates();
  std::vector<SequenceId> candidates;
  for (SequenceId id : decoding) {
    // A reasoning budget forces tokens in place of sampled ones, which a
    // verified chain of proposals cannot take.
    const EngineRequest& request = requests_.at(request_of(id)).request;
    if (request.speculative && !request.params.reasoning_budget.active()) candidates.push_back(id);
  }
  // Each candidate's request at the most it has room for (its proposals and
  // the one token verification adds), and what proposing would first cost.
  std::vector<ProposalRequest> requests;
  double remaining_steps = 0;
  for (SequenceId id : candidates) {
    const Sequence& seq = sequence(id);
    const auto& tokens = scheduler_->find(id)->tokens;
    const int left = seq.params().max_tokens ? *seq.params().max_tokens - seq.num_output_tokens()
                                             : config_.max_model_len - static_cast<int>(tokens.size());
    remaining_steps += std::max(0, left);
    if (left - 1 > 0) requests.push_back({id, tokens, left - 1});
  }
  SpeculationController::Outlook outlook;
  outlook.backlog_tokens = proposer_->backlog(requests);
  outlook.remaining_steps = remaining_steps / static_cast<double>(std::max<std::size_t>(1, candidates.size()));
  outlook.relative_cost = proposer_->relative_cost();
  outlook.prompts_pending =
      scheduler_->num_waiting() > 0 || scheduler_->num_running() > static_cast<int>(decoding.size());
  const int chosen = speculation_->choose(candidates, static_cast<int>(decoding.size()), outlook);
  if (chosen == 0 || requests.empty()) return;
  for (ProposalRequest& r : requests) r.max_tokens = std::min(r.max_tokens, chosen);
  const auto start = Clock::now();
  std::vector<std::vector<TokenId>> drafts;
  proposer_->propose(requests, drafts);
  speculation_->caught_up(outlook.backlog_tokens, static_cast<int>(requests.size()), seconds(Clock::now() - start));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    speculation_->proposed(requests[i].id, static_cast<int>(drafts[i].size()));
    if (!drafts[i].empty()) scheduler_->propose(requests[i].id, drafts[i]);
  }
}

std::vector<SampledToken> Engine::read_tokens(ScheduledSequence& q, const StepSamples& samples,
                                             std::size_t first_row) {
  Sequence& seq = sequence(q.id);
  const auto& tokens = scheduler_->find(q.id)->tokens;
  const auto draft = std::span<const TokenId>(tokens).subspan(static_cast<std::size_t>(q.num_computed_tokens + 1),
                                                               static_cast<std::size_t>(q.num_draft_tokens));
  SampledChain chain = read_sampled_rows(sampling_, samples, first_row, draft, seq.params());
  seq.rng().skip(chain.num_draws);
  if (q.num_draft_tokens > 0) count_speculation(q, chain.num_accepted);
  return std::move(chain.emitted);
}

std::vector<SampledToken> Engine::choose_tokens_on_host(ScheduledSequence& q, const float* logits) {
  Sequence& seq = sequence(q.id);
  const std::int64_t V = session_->config().vocab_size;
  const auto& tokens = scheduler_->find(q.id)->tokens;
  const auto draft = std::span<const TokenId>(tokens).subspan(static_cast<std::size_t>(q.num_computed_tokens + 1),
                                                               static_cast<std::size_t>(q.num_draft_tokens));
  const std::span<const std::uint32_t> masks = host_masks(seq, draft);
  if (q.num_draft_tokens == 0)
    return {sampler_.sample(std::span<const float>(logits, static_cast<std::size_t>(V)), seq.params(),
                            seq.prompt_counts(), seq.output_counts(), seq.rng(), masks)};
  const std::size_t words = seq.matcher() ? static_cast<std::size_t>(seq.matcher()->mask_words()) : 0;
  VerifyResult v = verify_draft(sampler_,
                                std::span<const float>(logits, static_cast<std::size_t>((q.num_draft_tokens + 1) * V)),
                                V, draft, seq.params(), seq.prompt_counts(), seq.mutable_output_counts(), seq.rng(),
                                verify_scratch_, masks, words);
  count_speculation(q, v.num_accepted);
  return std::move(v.emitted);
}

void Engine::attach_masks(Sequence& seq, std::span<const TokenId> draft, std::size_t first_row) {
  ConstraintMatcher* m = seq.matcher();
  if (m == nullptr) return;
  const auto start = Clock::now();
  sampling_.mask_words = m->mask_words();
  auto index = static_cast<std::int32_t>(sampling_.num_masks());
  constraint_masks(*m, draft, sampling_.masks);
  for (std::size_t i = 0; i <= draft.size(); ++i) sampling_.rows[first_row + i].mask_row = index++;
  time_masks(start, draft.size() + 1);
}

std::span<const std::uint32_t> Engine::host_masks(Sequence& seq, std::span<const TokenId> draft) {
  host_masks_.clear();
  ConstraintMatcher* m = seq.matcher();
  if (m == nullptr) return {};
  const auto start = Clock::now();
  constraint_masks(*m, draft, host_masks_);
  time_masks(start, draft.size() + 1);
  return host_masks_;
}

void Engine::time_masks(Clock::time_point start, std::size_t num_masks) {
  counts_.constraint_masks += static_cast<std::int64_t>(num_masks);
  counts_.constraint_mask_seconds += seconds(Clock::now() - start);
}

void Engine::count_speculation(ScheduledSequence& q, int num_accepted) {
  q.num_rejected = q.num_draft_tokens - num_accepted;
  proposer_->accepted(q.id, num_accepted);
  speculation_->verified(q.id, q.num_draft_tokens, num_accepted);
  counts_.spec_proposed_tokens += q.num_draft_tokens;
  counts_.spec_accepted_tokens += num_accepted;
  ++counts_.spec_steps;
}

void Engine::forget_speculation(SequenceId id) {
  if (!proposer_) return;
  proposer_->release(id);
  speculation_->release(id);
}

// One step, phase by phase.
void Engine::step() {
  const auto start = Clock::now();
  if (proposer_) propose_drafts();
  StepPlan plan = schedule();
  if (plan.empty()) {
    if (proposer_) speculation_->step_done(0.0, /*decode_only=*/false);
    publish();
    return;
  }
  copy_forked_blocks(plan);
  const StepInputs& in = prepare_inputs(plan);
  const StepSamples samples = runner_->execute(in.chunks, sampling_);
  const float* host_logits = logits_on_host(plan);
  const std::vector<std::vector<SampledToken>> chosen = choose_tokens(plan, samples, host_logits);
  complete(plan);
  fork_completions(plan, host_logits);
  emit(plan, chosen);
  publish();
  // What this step's choice of proposals cost: only steps that fed no prompt
  // are alike enough to compare.
  if (proposer_) speculation_->step_done(seconds(Clock::now() - start), in.decode_only, in.prompt_tokens_run);
}

StepPlan Engine::schedule() {
  StepPlan plan = scheduler_->schedule();
  for (SequenceId id : plan.preempted) forget_speculation(id);
  if (state_storage_) release_state_slots(plan);
  const auto now = Clock::now();
  for (const ScheduledSequence& q : plan.sequences) {
    RequestEntry& r = requests_.at(request_of(q.id));
    if (r.scheduled || index_of(q.id) != 0) continue;
    r.scheduled = true;
    r.first_scheduled = now;
    r.usage.cached_tokens = std::max(0, scheduler_->find(q.id)->num_cached_tokens);
    counts_.queue_time.push_back(seconds(now - r.arrival));
  }
  return plan;
}

void Engine::copy_forked_blocks(const StepPlan& plan) {
  if (plan.block_copies.empty()) return;
  std::vector<std::pair<std::int32_t, std::int32_t>> pairs;
  for (const BlockCopy& c : plan.block_copies) pairs.emplace_back(c.src, c.dst);
  for (PagedKv& pool : kv_storage_->pools()) session_->backend->copy_blocks(pool, pairs);
}

// Row i of a speculating sequence verifies its i-th proposal.
const Engine::StepInputs& Engine::prepare_inputs(const StepPlan& plan) {
  StepInputs& in = inputs_;
  const std::size_t n = plan.sequences.size();
  in.chunks.clear();
  in.first_logits.assign(n, -1);
  in.first_row.assign(n, 0);
  in.prompt_rows.clear();
  in.prompt_tokens_run = 0;
  in.decode_only = plan.preempted.empty();
  sampling_.clear();
  std::int32_t logits_row = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const ScheduledSequence& q = plan.sequences[i];
    in.decode_only = in.decode_only && q.sample && q.num_new_tokens == q.num_draft_tokens + 1;
    const SequenceState* s = scheduler_->find(q.id);
    SequenceChunk c;
    c.tokens = std::span<const TokenId>(s->tokens).subspan(static_cast<std::size_t>(q.num_computed_tokens),
                                                           static_cast<std::size_t>(q.num_new_tokens));
    c.num_computed_tokens = q.num_computed_tokens;
    c.block_table = &kv_->block_table(q.id);
    if (state_storage_) c.state_slot = state_slot(q.id, q.num_computed_tokens);
    // prompt_logprobs: a row for every fed token, the sampling row last.
    c.num_logits = q.prompt_logits ? q.num_new_tokens : q.sample ? q.num_draft_tokens + 1 : 0;
    in.chunks.push_back(c);
    in.prompt_tokens_run += std::max(0, std::min(s->num_prompt_tokens, q.num_computed_tokens + q.num_new_tokens) -
                                            q.num_computed_tokens);
    if (q.prompt_logits) in.prompt_rows.emplace_back(i, logits_row);
    logits_row += static_cast<std::int32_t>(c.num_logits);
    if (!q.sample) continue;
    in.first_logits[i] = logits_row - (q.num_draft_tokens + 1);
    if (config_.host_sampling) continue;
    Sequence& seq = sequence(q.id);
    const auto draft = std::span<const TokenId>(s->tokens).subspan(static_cast<std::size_t>(q.num_computed_tokens + 1),
                                                                    static_cast<std::size_t>(q.num_draft_tokens));
    in.first_row[i] = add_sampling_rows(sampling_, in.first_logits[i], seq.params(), seq.prompt_counts(),
                                        seq.output_counts(), seq.rng(), draft, adjustment_scratch_);
    attach_masks(seq, draft, in.first_row[i]);
  }
  return in;
}

const float* Engine::logits_on_host(const StepPlan& plan) {
  if (!config_.host_sampling && inputs_.prompt_rows.empty()) return nullptr;
  runner_->logits_to_host(host_logits_);
  const std::int64_t V = session_->config().vocab_size;
  for (const auto& [i, row] : inputs_.prompt_rows)
    collect_prompt_logprobs(plan.sequences[i], host_logits_.data() + row * V);
  return config_.host_sampling ? host_logits_.data() : nullptr;
}

std::vector<std::vector<SampledToken>> Engine::choose_tokens(StepPlan& plan, const StepSamples& samples,
                                                             const float* host_logits) {
  const std::int64_t V = session_->config().vocab_size;
  std::vector<std::vector<SampledToken>> chosen(plan.sequences.size());
  for (std::size_t i = 0; i < plan.sequences.size(); ++i) {
    ScheduledSequence& q = plan.sequences[i];
    if (!q.sample) continue;
    chosen[i] = host_logits != nullptr ? choose_tokens_on_host(q, host_logits + inputs_.first_logits[i] * V)
                                       : read_tokens(q, samples, inputs_.first_row[i]);
  }
  return chosen;
}

void Engine::complete(const StepPlan& plan) {
  scheduler_->complete_step(plan);
  counts_.computed_prompt_tokens += inputs_.prompt_tokens_run;
  ++counts_.num_steps;
}

void Engine::fork_completions(const StepPlan& plan, const float* host_logits) {
  std::vector<std::pair<std::size_t, std::int32_t>> parents;
  for (std::size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& q = plan.sequences[i];
    if (!q.sample || index_of(q.id) != 0) continue;
    RequestEntry& r = requests_.at(request_of(q.id));
    if (r.forked) continue;
    r.forked = true;
    if (r.completions.size() > 1) parents.emplace_back(i, inputs_.first_logits[i]);
  }
  if (!parents.empty()) sample_forks(parents, plan, host_logits);
}

void Engine::sample_forks(const std::vector<std::pair<std::size_t, std::int32_t>>& parents, const StepPlan& plan,
                          const float* host_logits) {
  struct Child {
    RequestId rid;
    int index;
    std::size_t row;
  };
  std::vector<Child> children;
  sampling_.clear();
  const std::int64_t V = session_->config().vocab_size;
  for (const auto& [i, logits_row] : parents) {
    const ScheduledSequence& q = plan.sequences[i];
    const RequestId rid = request_of(q.id);
    RequestEntry& r = requests_.at(rid);
    for (int c = 1; c < static_cast<int>(r.completions.size()); ++c) {
      const SequenceId child = sequence_id(rid, c);
      scheduler_->fork(q.id, child);
      if (scheduler_->find(child)->status != SequenceStatus::kRunning) continue;
      Sequence& seq = *r.completions[static_cast<std::size_t>(c)];
      if (host_logits != nullptr) {
        const SampledToken t =
            sampler_.sample(std::span<const float>(host_logits + logits_row * V, static_cast<std::size_t>(V)),
                            seq.params(), seq.prompt_counts(), seq.output_counts(), seq.rng(), host_masks(seq, {}));
        emit_tokens(rid, c, std::span<const SampledToken>(&t, 1), false);
        continue;
      }
      children.push_back({rid, c, add_sampling_rows(sampling_, logits_row, seq.params(), seq.prompt_counts(),
                                                    seq.output_counts(), seq.rng(), {}, adjustment_scratch_)});
      attach_masks(seq, {}, children.back().row);
    }
  }
  if (children.empty()) return;
  const StepSamples samples = runner_->sample(sampling_);
  for (const Child& c : children) {
    Sequence& seq = *requests_.at(c.rid).completions[static_cast<std::size_t>(c.index)];
    SampledChain chain = read_sampled_rows(sampling_, samples, c.row, {}, seq.params());
    seq.rng().skip(chain.num_draws);
    emit_tokens(c.rid, c.index, chain.emitted, false);
  }
}

void Engine::emit_tokens(RequestId rid, int index, std::span<const SampledToken> tokens, bool speculated) {
  RequestEntry& r = requests_.at(rid);
  Sequence& seq = *r.completions[static_cast<std::size_t>(index)];
  const SequenceId sid = sequence_id(rid, index);
  // Accepted proposals are already the scheduler's tokens; the last token is new.
  for (std::size_t j = 0; j < tokens.size(); ++j) {
    const bool last = j + 1 == tokens.size();
    FOLIO_CHECK(speculated || last);
    SampledToken token = tokens[j];
    if (const std::optional<TokenId> forced = seq.forced_token()) {
      // The reasoning budget is spent: its closing token, not the sampled
      // one, whose logprobs do not describe it: the forced token's is 0
      // (certain), with no alternatives. Never a proposal: such sequences
      // do not speculate.
      FOLIO_CHECK(last);
      const bool with_logprobs = token.logprob.has_value();
      token = SampledToken{};
      token.token = *forced;
      if (with_logprobs) token.logprob = 0.0f;  // certain: forced (clients read a number here)
    }
    if (last) scheduler_->append_token(sid, token.token);
    bool done = seq.append(token);
    const SequenceState* s = scheduler_->find(sid);
    if (!done && last && s->num_tokens() >= config_.max_model_len) {
      seq.finish(FinishReason::kLength);
      done = true;
    }
    ++counts_.generation_tokens;
    if (done) {
      scheduler_->finish(sid);
      forget_speculation(sid);
      ++r.num_finished;
      break;
    }
  }
  touched_.insert(rid);
}

void Engine::finish_request(RequestId id, FinishReason reason) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  RequestEntry& r = it->second;
  for (std::size_t i = 0; i < r.completions.size(); ++i) {
    scheduler_->finish(r.sequence_ids[i]);
    forget_speculation(r.sequence_ids[i]);
    if (!r.completions[i]->finished()) {
      r.completions[i]->finish(reason);
      ++r.num_finished;
    }
  }
  queue_output(id, r);
}

void Engine::collect_prompt_logprobs(const ScheduledSequence& q, const float* logits) {
  RequestEntry& r = requests_.at(request_of(q.id));
  const std::vector<TokenId>& prompt = r.request.prompt;
  const int num_top = *r.request.params.prompt_logprobs;
  const auto V = static_cast<std::size_t>(session_->config().vocab_size);
  for (int j = 0; j < q.num_new_tokens; ++j) {
    // Row j predicts the prompt token after position num_computed_tokens + j;
    // a recompute after preemption finds the ones it has already.
    const auto next = static_cast<std::size_t>(q.num_computed_tokens + j + 1);
    if (next >= prompt.size()) break;
    if (next != r.prompt_logprobs.size() + 1) continue;
    const std::span<const float> row(logits + static_cast<std::size_t>(j) * V, V);
    PromptTokenLogprob p;
    Sampler::fill_logprobs(row, prompt[next], num_top, p.token);
    p.token.token = prompt[next];
    const float own = row[static_cast<std::size_t>(prompt[next])];
    p.rank = 1 + static_cast<int>(std::count_if(row.begin(), row.end(), [own](float l) { return l > own; }));
    r.prompt_logprobs.push_back(p);
  }
}

void Engine::emit(const StepPlan& plan, const std::vector<std::vector<SampledToken>>& chosen) {
  for (std::size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& q = plan.sequences[i];
    if (q.sample) emit_tokens(request_of(q.id), index_of(q.id), chosen[i], q.num_draft_tokens > 0);
  }
  queue_touched_outputs();
}

void Engine::queue_touched_outputs() {
  const auto done = Clock::now();
  for (RequestId rid : touched_) {
    auto it = requests_.find(rid);
    if (it == requests_.end()) continue;
    RequestEntry& r = it->second;
    if (r.first_token == Clock::time_point{}) {
      r.first_token = done;
      counts_.time_to_first_token.push_back(seconds(done - r.arrival));
    } else {
      counts_.inter_token_latency.push_back(seconds(done - r.last_token));
    }
    r.last_token = done;
    queue_output(rid, r);
  }
  touched_.clear();
}

void Engine::queue_output(RequestId id, RequestEntry& r) {
  RequestOutput out;
  int completion_tokens = 0;
  for (auto& c : r.completions) {
    completion_tokens += c->num_output_tokens();
    if (c->has_delta()) out.deltas.push_back(c->take_delta());
  }
  r.usage.completion_tokens = completion_tokens;
  out.usage = r.usage;
  if (!r.prompt_logprobs_sent && r.request.params.prompt_logprobs &&
      r.prompt_logprobs.size() + 1 == r.request.prompt.size()) {
    out.prompt_logprobs = std::move(r.prompt_logprobs);
    r.prompt_logprobs_sent = true;
  }
  const bool finished = r.num_finished == static_cast<int>(r.completions.size());
  out.finished = finished;
  outbox_.emplace_back(r.stream, std::move(out));
  if (!finished) return;
  counts_.e2e_latency.push_back(seconds(Clock::now() - r.arrival));
  ++counts_.num_requests_finished;
  ++num_finished_in_outbox_;
  for (SequenceId s : r.sequence_ids) owners_.erase(s);
  requests_.erase(id);
}

// The stats go first, so that a client that has its last output finds them
// counted; the queue count last, so that drain() returns only once every
// stream has its final output.
void Engine::publish() {
  {
    std::lock_guard lock(stats_mutex_);
    counts_.move_into(stats_);
    refresh_gauges();
  }
  for (auto& [stream, out] : outbox_) stream->push(std::move(out));
  outbox_.clear();
  if (num_finished_in_outbox_ == 0) return;
  std::lock_guard lock(mutex_);
  num_queued_ -= num_finished_in_outbox_;
  num_finished_in_outbox_ = 0;
  idle_.notify_all();
}

void Engine::refresh_gauges() {
  stats_.num_running = scheduler_->num_running();
  stats_.num_waiting = scheduler_->num_waiting();
  stats_.kv = kv_->usage();
  stats_.kv_slot_steps += static_cast<std::int64_t>(stats_.kv.num_used_blocks) * stats_.kv.block_size;
  stats_.kv_empty_slot_steps += stats_.kv.num_empty_slots;
  stats_.prefix_cache = kv_->prefix_cache_stats();
  stats_.num_preemptions = scheduler_->num_preemptions();
  copy_block_map();
}

void Engine::copy_block_map() {
  const Clock::time_point now = Clock::now();
  if (scheduler_->has_work() && now - block_map_time_ < std::chrono::milliseconds(100)) return;
  block_map_ = block_map(kv_->pool());
  block_map_usage_ = stats_.kv;
  block_map_time_ = now;
}

std::string Engine::kv_block_map(KvUsage* usage) const {
  std::lock_guard lock(stats_mutex_);
  if (usage != nullptr) *usage = block_map_usage_;
  return block_map_;
}

}  // namespace folio
