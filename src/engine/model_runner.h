// ModelRunner: turns one step's work (a chunk of new tokens per sequence)
// into one flattened batch - token ids, positions, slot mapping, query
// starts, sequence lengths, block tables, logit rows - runs the model once
// over it (docs/architecture.md rule 4) and samples the rows the step asks for on the
// device. What crosses: one upload of the step's metadata and sampling
// records from pinned staging, and one download of the sampled tokens (plus
// the logprobs asked for) - the step's only synchronisation point. A step
// that samples nothing does not wait, so staging comes in two slots used in
// turn, and a slot is written only once the copy that last read it has run
// (docs/architecture.md rule 8). Its device buffers are allocated once, with fixed
// offsets and a fixed block table stride; with pad_to_buckets a step's token
// count is rounded up to a few fixed sizes (padding tokens are sequences of
// their own that write no cache slot and change no output), so that a
// decode step's shapes repeat and a CUDA graph could replay them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "kv/block_table.h"
#include "kv/kv_storage.h"
#include "kv/state_storage.h"
#include "model/model.h"

namespace folio {

// One sequence's share of a step.
struct SequenceChunk {
  std::span<const TokenId> tokens;       // the new tokens fed this step
  std::int64_t num_computed_tokens = 0;  // tokens already in the cache before them
  const BlockTable* block_table = nullptr;  // covers num_computed_tokens + tokens.size()
  std::int64_t num_logits = 0;           // logits for this many of the chunk's last tokens
  // Hybrid models: the sequence's slot of the runner's StateStorage, held
  // from its first chunk to its last (StateStorage::acquire).
  std::int64_t state_slot = -1;
};

// What a step samples, on the host: one record per row, its logits_row
// counting the step's logits rows in chunk order, and the adjustments (bias
// and penalties) the records point into. add() numbers the logprob slots.
struct SamplingRequest {
  std::vector<SamplingRowParams> rows;
  std::vector<LogitAdjustment> adjustments;
  std::int64_t num_logprob_rows = 0;
  // Token masks of constrained rows, [num_masks, mask_words]; rows point at
  // them by mask_row. Empty when no row is constrained: nothing is copied.
  std::vector<std::uint32_t> masks;
  std::int64_t mask_words = 0;

  std::int64_t num_masks() const { return mask_words > 0 ? static_cast<std::int64_t>(masks.size()) / mask_words : 0; }

  void clear();
  // Appends a row whose adjustments are `adjustments` (moved to the end of
  // the list); sets its adjust range and logprob slot. Returns its index.
  std::size_t add(SamplingRowParams row, std::span<const LogitAdjustment> adjustments);
};

// The sampled rows of a step, on the host, valid until the next call.
struct StepSamples {
  std::span<const SampleResult> results;    // [rows]
  std::span<const LogprobResult> logprobs;  // [rows that asked], by logprob_slot
};

struct RunnerOptions {
  std::int64_t max_num_batched_tokens = 512;
  std::int64_t max_num_seqs = 64;
  std::int64_t max_logits = 64;        // logit rows of a step
  std::int64_t max_sampling_rows = 0;  // sampled rows of a call; 0: max_logits
  bool pad_to_buckets = false;         // round token counts up (see padded_num_tokens)
  // The most tokens a sequence may reach (ForwardBatch::max_model_len); 0:
  // the model's context.
  std::int64_t max_model_len = 0;
};

class ModelRunner {
 public:
  // state: the per-sequence state of a hybrid model's linear-attention
  // layers (required for one, unused otherwise).
  ModelRunner(Backend& backend, Model& model, KvStorage& kv, const RunnerOptions& options,
              StateStorage* state = nullptr);

  // Runs the step's forward pass, then samples `sampling`'s rows from its
  // logits (none: no sampling, nothing comes back).
  StepSamples execute(std::span<const SequenceChunk> chunks, const SamplingRequest& sampling = {});
  // Samples more rows from the last step's logits, which stay on the device
  // (the first token of n > 1 completions forked after the step).
  StepSamples sample(const SamplingRequest& sampling);

  // The last step's logits on the device, [num_logits, vocab] f32, valid
  // until the next execute(); and a host copy of them (the host sampling
  // path, perplexity and tests: a vocabulary of floats per row crosses).
  const Tensor& logits() const { return logits_; }
  void logits_to_host(std::vector<float>& out);

  std::int64_t max_num_batched_tokens() const { return max_tokens_; }
  std::int64_t max_blocks_per_seq() const { return max_blocks_per_seq_; }
  // The token count a step of n tokens runs with: n, or with pad_to_buckets
  // 1, 2, 4, 8, then multiples of 8 up to 256, then of 64 (capped at the
  // runner's token budget).
  std::int64_t padded_num_tokens(std::int64_t n) const;

 private:
  // Pinned staging of one step: its metadata and sampling records (at the
  // offsets of Layout), adjustments and token masks, and the queue's point
  // after the copies that read it last.
  struct Staging {
    Buffer meta;
    Buffer adjustments;  // grows with the largest step's adjustments
    Buffer masks;        // grows with the largest step's token masks
    QueuePoint uploaded = 0;
  };
  // The next slot of staging, once the copies that last read it have run.
  Staging& next_staging();
  void stage_sampling(Staging& staging, const SamplingRequest& sampling);
  void stage(const void* data, std::size_t bytes, Buffer& staging, Buffer& device);
  StepSamples run_sampling(const SamplingRequest& sampling);

  Backend& backend_;
  Model& model_;
  KvStorage& kv_;
  StateStorage* state_;
  std::int64_t max_tokens_;
  std::int64_t max_seqs_;   // with room for padding sequences
  std::int64_t max_logits_;
  std::int64_t max_rows_;
  std::int64_t max_blocks_per_seq_;
  bool pad_;
  std::int64_t max_model_len_;
  Workspace workspace_;

  // The step's metadata and sampling records, at the same offsets in pinned
  // host staging and on the device; block tables last, so that one copy of
  // a prefix carries a step.
  struct Layout {
    std::size_t token_ids, positions, slots, logit_rows, query_start, seq_lens, state_slots, rows, block_tables, bytes;
  };
  Layout layout_{};
  std::array<Staging, 2> staging_;
  std::size_t slot_ = 0;  // the slot the last step used
  Buffer device_meta_;
  Buffer device_results_;  // a step's SampleResults, then its LogprobResults
  Buffer host_results_;    // the same, pinned
  Buffer device_adjustments_;
  Buffer device_masks_;
  std::vector<SlotId> slot_scratch_;
  Tensor logits_;
};

}  // namespace folio
