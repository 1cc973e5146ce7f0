// ModelRunner: turns one step's work (a chunk of new tokens per sequence)
// into one flattened batch - token ids, positions, slot mapping, query
// starts, sequence lengths, block tables, logit rows - and runs the model
// once over it (DESIGN.md rule 4).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "tokenizer/vocab.h"

namespace folio {

// One sequence's share of a step.
struct SequenceChunk {
  std::span<const TokenId> tokens;           // the new tokens fed this step
  std::int64_t num_computed_tokens = 0;      // tokens already in the cache before them
  std::span<const std::int32_t> block_table;  // covers num_computed_tokens + tokens.size()
  std::int64_t num_logits = 0;               // logits for this many of the chunk's last tokens
};

class ModelRunner {
 public:
  ModelRunner(Backend& backend, Model& model, KvStorage& kv, std::int64_t max_num_batched_tokens,
              std::int64_t max_num_seqs, std::int64_t max_logits);

  // Runs the step; returns logits [sum of num_logits, vocab] f32, rows in
  // chunk order. The view is valid until the next execute().
  Tensor execute(std::span<const SequenceChunk> chunks);

  // Host copy of the logits of the last execute() (the only per-step
  // device-to-host copy besides sampled ids on a GPU).
  const float* host_logits(const Tensor& logits);

  std::int64_t max_num_batched_tokens() const { return max_tokens_; }
  std::int64_t max_blocks_per_seq() const { return max_blocks_per_seq_; }

 private:
  Backend& backend_;
  Model& model_;
  KvStorage& kv_;
  std::int64_t max_tokens_;
  std::int64_t max_seqs_;
  std::int64_t max_logits_;
  std::int64_t max_blocks_per_seq_;
  Workspace workspace_;

  // Host staging, then the same on the device.
  std::vector<std::int32_t> token_ids_, positions_, slots_, query_start_, seq_lens_, block_tables_, logit_rows_;
  Buffer device_meta_;
  Tensor d_token_ids_, d_positions_, d_slots_, d_query_start_, d_seq_lens_, d_block_tables_, d_logit_rows_;
  std::vector<float> host_logits_;
};

}  // namespace folio
