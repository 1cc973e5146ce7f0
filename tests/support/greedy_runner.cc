#include "support/greedy_runner.h"

#include <algorithm>

namespace folio::testing {
namespace {

KvStorageOptions kv_options(std::int64_t blocks, DType dtype) {
  KvStorageOptions o;
  o.dtype = dtype;
  o.num_blocks = blocks;
  return o;
}

}  // namespace

GreedyRunner::GreedyRunner(Backend& backend, LoadedModel& model, std::int64_t max_context, std::int64_t max_seqs,
                           DType kv_dtype, std::int64_t max_batched_tokens)
    : model_(model),
      blocks_per_seq_((max_context + kDefaultBlockSize - 1) / kDefaultBlockSize),
      kv_(backend, model.config, kv_options(blocks_per_seq_ * max_seqs, kv_dtype)) {
  RunnerOptions o;
  o.max_num_batched_tokens = std::max(max_batched_tokens, max_context);
  o.max_num_seqs = max_seqs;
  o.max_logits = std::max(max_seqs, max_context);
  o.max_model_len = max_context;
  // A hybrid model's sequence s holds state slot s, as it holds its blocks.
  if (!model.config.recurrent_layers.empty()) state_ = std::make_unique<StateStorage>(backend, model.config, max_seqs);
  runner_ = std::make_unique<ModelRunner>(backend, *model.model, kv_, o, state_.get());
  for (std::int64_t s = 0; s < max_seqs; ++s) {
    tables_.emplace_back(kDefaultBlockSize);
    for (std::int64_t b = 0; b < blocks_per_seq_; ++b) tables_.back().append(static_cast<BlockId>(s * blocks_per_seq_ + b));
  }
}

const BlockTable* GreedyRunner::table(std::int64_t seq) const { return &tables_[static_cast<std::size_t>(seq)]; }

std::vector<float> GreedyRunner::teacher_forced(std::span<const TokenId> ids, std::int64_t chunk_tokens) {
  const auto n = static_cast<std::int64_t>(ids.size());
  const std::int64_t V = vocab_size();
  if (chunk_tokens <= 0) chunk_tokens = n;
  std::vector<float> out(static_cast<std::size_t>(n * V));
  for (std::int64_t done = 0; done < n; done += chunk_tokens) {
    SequenceChunk c;
    const std::int64_t len = std::min(chunk_tokens, n - done);
    c.tokens = ids.subspan(static_cast<std::size_t>(done), static_cast<std::size_t>(len));
    c.num_computed_tokens = done;
    c.block_table = table(0);
    c.num_logits = len;
    c.state_slot = state_ != nullptr ? 0 : -1;
    runner_->execute(std::span<const SequenceChunk>(&c, 1));
    runner_->logits_to_host(host_logits_);
    std::copy(host_logits_.begin(), host_logits_.end(), out.begin() + done * V);
  }
  return out;
}

std::vector<std::vector<TokenId>> GreedyRunner::greedy(const std::vector<std::vector<TokenId>>& prompts,
                                                       int max_new_tokens, std::span<const TokenId> stop_ids) {
  const auto S = static_cast<std::int64_t>(prompts.size());
  std::vector<std::vector<TokenId>> out(prompts.size());
  std::vector<std::int64_t> computed(prompts.size(), 0);
  std::vector<bool> done(prompts.size(), false);
  // Step 0 prefills every prompt; later steps feed each live sequence's last token.
  for (int step = 0; step <= max_new_tokens; ++step) {
    std::vector<SequenceChunk> chunks;
    std::vector<std::int64_t> owners;
    for (std::int64_t s = 0; s < S; ++s) {
      if (done[s]) continue;
      SequenceChunk c;
      if (step == 0) {
        c.tokens = prompts[s];
      } else {
        c.tokens = std::span<const TokenId>(&out[s].back(), 1);
      }
      c.num_computed_tokens = computed[s];
      c.block_table = table(s);
      c.num_logits = 1;
      c.state_slot = state_ != nullptr ? s : -1;
      chunks.push_back(c);
      owners.push_back(s);
    }
    if (chunks.empty() || step == max_new_tokens) break;
    // Each row's argmax, on the device.
    SamplingRequest argmax;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      SamplingRowParams greedy;
      greedy.temperature = 0.0f;
      greedy.logits_row = static_cast<std::int32_t>(i);
      argmax.add(greedy, {});
    }
    const StepSamples samples = runner_->execute(chunks, argmax);
    for (std::size_t i = 0; i < owners.size(); ++i) {
      const std::int64_t s = owners[i];
      computed[s] += static_cast<std::int64_t>(chunks[i].tokens.size());
      const TokenId next = samples.results[i].token;
      out[s].push_back(next);
      if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) done[s] = true;
    }
  }
  return out;
}

TrajectoryAgreement follow_llama_cpp(GreedyRunner& runner, const std::vector<LlamaCppContinuation>& cases,
                                     double decisive_margin) {
  const auto V = static_cast<std::size_t>(runner.vocab_size());
  TrajectoryAgreement a;
  for (const LlamaCppContinuation& c : cases) {
    std::vector<TokenId> ids = c.prompt;
    ids.insert(ids.end(), c.tokens.begin(), c.tokens.end() - 1);
    const std::vector<float> logits = runner.teacher_forced(ids);
    for (std::size_t s = 0; s < c.tokens.size(); ++s) {
      const float* row = logits.data() + (c.prompt.size() - 1 + s) * V;
      const auto ours = static_cast<TokenId>(std::max_element(row, row + V) - row);
      const bool same = ours == c.tokens[s];
      ++a.steps;
      a.agree += same ? 1 : 0;
      if (c.margins[s] > decisive_margin) {
        ++a.decisive;
        a.decisive_agree += same ? 1 : 0;
      }
      if (!same) a.worst_disagreement_margin = std::max(a.worst_disagreement_margin, c.margins[s]);
    }
  }
  return a;
}

}  // namespace folio::testing
