// RecurrentState: the per-sequence memory of one linear-attention layer
// (gated DeltaNet, Qwen3-Next / Qwen3.5), in slots of fixed size whatever
// the context length: the causal convolution's last kernel - 1 inputs and
// the delta rule's matrix. A running sequence owns one slot (the engine's
// StateCache hands them out); a slot is valid only for the sequence that
// last wrote it, and a sequence whose step starts at position 0 starts from
// zeros, so a new or recomputed sequence never reads what a slot held.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace folio {

struct RecurrentState {
  Tensor conv;   // [num_slots, kernel - 1, channels] f32
  Tensor state;  // [num_slots, value_heads, key_dim, value_dim] f32
  std::int64_t num_slots() const { return state.shape[0]; }
  std::int64_t num_value_heads() const { return state.shape[1]; }
  std::int64_t key_dim() const { return state.shape[2]; }
  std::int64_t value_dim() const { return state.shape[3]; }
};

// The gated delta rule's constants of one layer (Backend::gated_delta_rule).
struct DeltaRuleParams {
  std::int64_t num_key_heads = 0;
  // Which key head value head h reads: h / (value_heads / key_heads) as
  // Hugging Face checkpoints group them, or h % key_heads as llama.cpp's
  // converter tiles them (the same when there is one key head).
  bool tiled_heads = false;
  Tensor decay;    // [value_heads] f32: A = -exp(A_log)
  Tensor dt_bias;  // [value_heads] f32
};

}  // namespace folio
