#include <algorithm>

#include "core/error.h"
#include "model/model.h"

namespace folio {
namespace {
constexpr int kNumSlots = 8;
constexpr int kNumMoeSlots = 12;  // routing and the grouped (token, expert) rows; Gemma 4's per-layer inputs
}  // namespace

Workspace::Workspace(Backend& backend, const ModelConfig& c, std::int64_t max_tokens, std::int64_t max_logits)
    : act_(backend.activation_dtype()),
      max_tokens_(max_tokens),
      max_logits_(max_logits),
      vocab_size_(c.vocab_size),
      num_slots_(c.is_moe() || c.per_layer_input_size > 0 ? kNumMoeSlots : kNumSlots) {
  std::int64_t widest = std::max({c.hidden_size, c.q_dim(), c.num_heads * c.value_head_dim,
                                  c.intermediate_size, c.kv_dim(), c.num_kv_heads * c.value_head_dim,
                                  c.num_layers * c.per_layer_input_size});
  if (!c.recurrent_layers.empty())
    widest = std::max({widest, c.linear.conv_channels(), c.linear.num_value_heads * c.linear.value_dim});
  if (c.is_moe())
    widest = std::max({widest, c.num_experts + 1, c.shared_expert_intermediate_size,
                       c.num_experts_used * std::max(c.hidden_size, c.expert_intermediate_size)});
  slot_floats_ = (max_tokens * widest + 15) / 16 * 16;
  std::size_t bytes = (static_cast<std::size_t>(slot_floats_) * num_slots_ +
                       static_cast<std::size_t>(max_logits * vocab_size_)) * sizeof(float);
  buffer_ = backend.allocate(bytes);
}

// Slots are sized in 4-byte numbers, enough for any activation type.
Tensor Workspace::slot(int index, DType dtype, std::int64_t rows, std::int64_t cols) const {
  static_assert(sizeof(std::int32_t) == sizeof(float));
  FOLIO_CHECK(index >= 0 && index < num_slots_ && rows >= 0 && cols >= 0 && rows * cols <= slot_floats_);
  return buffer_.view(dtype, {rows, cols}, static_cast<std::size_t>(index * slot_floats_) * sizeof(float));
}

Tensor Workspace::act(int index, std::int64_t rows, std::int64_t cols) const { return slot(index, act_, rows, cols); }

Tensor Workspace::f32(int index, std::int64_t rows, std::int64_t cols) const {
  return slot(index, DType::F32, rows, cols);
}

Tensor Workspace::i32(int index, std::int64_t rows, std::int64_t cols) const {
  return slot(index, DType::I32, rows, cols);
}

Tensor Workspace::logits(std::int64_t rows) const {
  FOLIO_CHECK(rows <= max_logits_);
  return buffer_.view(DType::F32, {rows, vocab_size_},
                      static_cast<std::size_t>(num_slots_ * slot_floats_) * sizeof(float));
}

}  // namespace folio
