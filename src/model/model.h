// Model: one architecture's forward pass, written once against Backend ops
// over a flattened ragged batch (docs/architecture.md rule 3). It reads its weights and
// writes this step's K/V into the paged cache; activations live in a
// Workspace allocated once for the largest step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"

namespace folio {

// One step's inputs, all on the backend's device.
struct ForwardBatch {
  Tensor token_ids;        // [num_tokens] i32
  AttentionMetadata meta;  // positions, slots, sequence layout
  Tensor logits_rows;      // [num_logits] i32: the token rows that need logits
  // The most tokens any sequence of the engine may reach (its
  // --max-model-len), the same every step: LongRoPE picks its factors by it.
  // 0: the model's context.
  std::int64_t max_model_len = 0;
  // Hybrid models (ModelConfig::recurrent_layers): each sequence's state
  // slot, [num_seqs] i32 (negative: a padding sequence), and the state of
  // every linear-attention layer, in layer order. Unset for other models.
  Tensor state_slots;
  std::vector<RecurrentState>* recurrent_state = nullptr;
};

// Activation buffers on the backend's device for steps of up to max_tokens
// tokens and max_logits logit rows.
class Workspace {
 public:
  Workspace(Backend& backend, const ModelConfig& config, std::int64_t max_tokens, std::int64_t max_logits);
  std::int64_t max_tokens() const { return max_tokens_; }
  std::int64_t max_logits() const { return max_logits_; }
  // A [rows, cols] view of slot `index` in the backend's activation type
  // (act), f32 or i32. Each slot holds max_tokens rows of the widest
  // activation; a mixture of experts' slots hold max_tokens x experts-used
  // rows, one per (token, expert) pair.
  Tensor act(int index, std::int64_t rows, std::int64_t cols) const;
  Tensor f32(int index, std::int64_t rows, std::int64_t cols) const;
  Tensor i32(int index, std::int64_t rows, std::int64_t cols) const;
  // [rows, vocab] f32.
  Tensor logits(std::int64_t rows) const;

 private:
  Tensor slot(int index, DType dtype, std::int64_t rows, std::int64_t cols) const;

  Buffer buffer_;
  DType act_;
  std::int64_t max_tokens_;
  std::int64_t max_logits_;
  std::int64_t slot_floats_;
  std::int64_t vocab_size_;
  int num_slots_;
};

class Model {
 public:
  virtual ~Model() = default;
  const ModelConfig& config() const { return config_; }

  // Runs the batch through the model; logits: [num_logits, vocab] f32.
  virtual void forward(const ForwardBatch& batch, std::vector<PagedKv>& kv, const Workspace& ws,
                       Tensor& logits) = 0;

 protected:
  explicit Model(ModelConfig config) : config_(std::move(config)) {}
  ModelConfig config_;
};

}  // namespace folio
