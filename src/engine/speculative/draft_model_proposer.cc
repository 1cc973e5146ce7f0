#include "engine/speculative/draft_model_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace folio {
namespace {

constexpr std::int64_t kDraftBatchTokens = 512;
constexpr std::uint64_t kDraftKvBytes = 1ull << 30;

}  // namespace

DraftModelProposer::DraftModelProposer(const ModelSession& target, std::shared_ptr<ModelSession> draft,
                                       int max_num_seqs, int max_model_len, KvCacheDType kv_dtype)
    : draft_(std::move(draft)), max_model_len_(max_model_len) {
  const Vocab& t = target.tokenizer->vocab();
  const Vocab& d = draft_->tokenizer->vocab();
  if (t.size() != d.size() || t.tokens != d.tokens)
    fail("the draft model's vocabulary ({} tokens) differs from the target's ({} tokens); speculative decoding "
         "needs a draft from the same family",
         d.size(), t.size());
  if (target.loaded.weights && draft_->loaded.weights && target.loaded.weights->total_bytes() > 0)
    relative_cost_ = static_cast<double>(draft_->loaded.weights->total_bytes()) /
                     static_cast<double>(target.loaded.weights->total_bytes());
  if (target.config().vocab_size != draft_->config().vocab_size)
    fail("the draft model scores {} tokens and the target {}; they must agree", draft_->config().vocab_size,
         target.config().vocab_size);
  max_model_len_ = std::min<std::int64_t>(max_model_len, draft_->config().context_length);

  const ModelConfig& c = draft_->config();
  KvStorageOptions o;
  o.dtype = kv_dtype;
  const std::int64_t per_seq = (max_model_len_ + o.block_size - 1) / o.block_size;
  o.num_blocks = std::min<std::int64_t>(per_seq * max_num_seqs,
                                        KvStorage::blocks_for_budget(c, o.block_size, o.dtype, kDraftKvBytes));
  if (o.num_blocks < per_seq) fail("the draft model's KV cache cannot hold one sequence of {} tokens", max_model_len_);
  storage_ = std::make_unique<KvStorage>(*draft_->backend, c, o);
  KvCacheConfig kc;
  kc.num_blocks = static_cast<int>(o.num_blocks);
  kc.block_size = static_cast<int>(o.block_size);
  kc.enable_prefix_caching = false;
  kv_ = std::make_unique<KvCacheManager>(kc);
  RunnerOptions runner;
  runner.max_num_batched_tokens = kDraftBatchTokens;
  runner.max_num_seqs = max_num_seqs + 128;
  runner.max_logits = max_num_seqs + 128;
  runner.max_model_len = max_model_len_;
  runner_ = std::make_unique<ModelRunner>(*draft_->backend, *draft_->loaded.model, *storage_, runner);
}

void DraftModelProposer::propose(std::span<const ProposalRequest> requests, std::vector<std::vector<TokenId>>& out) {
  out.assign(requests.size(), {});
  // Which requests take part: those whose sequence (and proposals) fit.
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const ProposalRequest& r = requests[i];
    const auto len = static_cast<std::int64_t>(r.tokens.size());
    if (len + r.max_tokens > max_model_len_) continue;
    State& s = states_[r.id];
    if (s.computed > len) {  // the sequence was recomputed from less: start over
      kv_->free(r.id);
      s = State{};
    }
    // Back to the verified tokens (proposals the target never checked are
    // dropped), then slots for the catch-up and the proposals (all but the
    // last are fed).
    if (kv_->contains(r.id) && kv_->num_tokens(r.id) > s.computed) kv_->rollback(r.id, kv_->num_tokens(r.id) - s.computed);
    const int need = static_cast<int>(len - s.computed + r.max_tokens - 1);
    const bool ok = kv_->contains(r.id) ? kv_->allocate_slots(r.id, need) : kv_->allocate_slots(r.id, need, PrefixHit{});
    if (!ok) continue;
    s.fed = s.computed;
    s.base = static_cast<int>(len);
    s.proposed = 0;
    live.push_back(i);
  }

  // Catch up on every unfed token, a budget of tokens per forward pass; the
  // pass that reaches a sequence's end gives its first proposal.
  std::vector<SequenceChunk> chunks;
  std::vector<std::size_t> owners;
  // Greedy: each logits row's argmax, chosen on the device.
  SamplingRequest argmax;
  auto run = [&] {
    if (chunks.empty()) return;
    argmax.clear();
    SamplingRowParams greedy;
    greedy.temperature = 0.0f;
    for (const SequenceChunk& c : chunks) {
      if (c.num_logits == 0) continue;
      greedy.logits_row = static_cast<std::int32_t>(argmax.rows.size());
      argmax.add(greedy, {});
    }
    const StepSamples samples = runner_->execute(chunks, argmax);
    std::size_t row = 0;
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      const ProposalRequest& r = requests[owners[c]];
      State& s = states_[r.id];
      s.fed += static_cast<int>(chunks[c].tokens.size());
      if (chunks[c].num_logits == 0) continue;
      out[owners[c]].push_back(samples.results[row++].token);
      ++s.proposed;
    }
    chunks.clear();
    owners.clear();
  };
  std::vector<std::vector<TokenId>> staging(requests.size());
  bool pending = true;
  while (pending) {
    pending = false;
    std::int64_t budget = kDraftBatchTokens;
    for (std::size_t i : live) {
      const ProposalRequest& r = requests[i];
      State& s = states_[r.id];
      const std::int64_t left = s.base - s.fed;
      if (left <= 0 || budget <= 0) {
        pending = pending || left > 0;
        continue;
      }
      const std::int64_t n = std::min(left, budget);
      SequenceChunk c;
      c.tokens = r.tokens.subspan(static_cast<std::size_t>(s.fed), static_cast<std::size_t>(n));
      c.num_computed_tokens = s.fed;
      c.block_table = &kv_->block_table(r.id);
      c.num_logits = n == left ? 1 : 0;
      chunks.push_back(c);
      owners.push_back(i);
      budget -= n;
      pending = pending || n < left;
    }
    run();
  }
  // Then one token at a time, every sequence that wants more together.
  for (;;) {
    for (std::size_t i : live) {
      const ProposalRequest& r = requests[i];
      State& s = states_[r.id];
      if (s.proposed == 0 || s.proposed >= r.max_tokens) continue;
      staging[i].assign(1, out[i].back());
      SequenceChunk c;
      c.tokens = staging[i];
      c.num_computed_tokens = s.fed;
      c.block_table = &kv_->block_table(r.id);
      c.num_logits = 1;
      chunks.push_back(c);
      owners.push_back(i);
    }
    if (chunks.empty()) break;
    run();
  }
  // Slots reserved for proposals that were not fed go back.
  for (std::size_t i : live) {
    const ProposalRequest& r = requests[i];
    const State& s = states_[r.id];
    const int unused = kv_->num_tokens(r.id) - s.fed;
    if (unused > 0) kv_->rollback(r.id, unused);
  }
}

std::int64_t DraftModelProposer::backlog(std::span<const ProposalRequest> requests) const {
  std::int64_t n = 0;
  for (const ProposalRequest& r : requests) {
    const auto it = states_.find(r.id);
    const int computed = it == states_.end() ? 0 : it->second.computed;
    n += std::max<std::int64_t>(0, static_cast<std::int64_t>(r.tokens.size()) - computed);
  }
  return n;
}

void DraftModelProposer::accepted(SequenceId id, int num_accepted) {
  auto it = states_.find(id);
  if (it == states_.end() || !kv_->contains(id)) return;
  State& s = it->second;
  // Valid draft KV: the sequence as it was plus the accepted proposals that were fed.
  const int valid = std::min(s.fed, s.base + num_accepted);
  if (s.fed > valid) kv_->rollback(id, s.fed - valid);
  s.computed = valid;
  s.fed = valid;
}

void DraftModelProposer::release(SequenceId id) {
  if (kv_->contains(id)) kv_->free(id);
  states_.erase(id);
}

std::unique_ptr<Proposer> make_draft_model_proposer(const ModelSession& target, const SpeculativeConfig& config,
                                                    int max_num_seqs, int max_model_len, KvCacheDType kv_dtype) {
  if (config.draft_model_path.empty()) fail("speculative decoding with a draft model needs its path (draft:PATH)");
  ModelSessionOptions o;
  o.model_path = config.draft_model_path;
  o.backend = target.backend_options;
  o.shared_backend = target.backend;  // the target's device, threads and stream
  auto draft = open_model_session(o);
  return std::make_unique<DraftModelProposer>(target, std::move(draft), max_num_seqs, max_model_len, kv_dtype);
}

}  // namespace folio
