#include "kv/state_storage.h"

#include "core/error.h"

namespace folio {
namespace {

constexpr std::uint64_t kAlign = 64;
std::uint64_t aligned(std::uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::uint64_t conv_bytes(const LinearAttentionConfig& a, std::int64_t num_slots) {
  return aligned(static_cast<std::uint64_t>(num_slots * (a.conv_kernel - 1) * a.conv_channels()) * sizeof(float));
}

std::uint64_t matrix_bytes(const LinearAttentionConfig& a, std::int64_t num_slots) {
  return aligned(static_cast<std::uint64_t>(num_slots * a.num_value_heads * a.key_dim * a.value_dim) * sizeof(float));
}

}  // namespace

std::uint64_t StateStorage::bytes_for(const ModelConfig& c, std::int64_t num_slots) {
  return static_cast<std::uint64_t>(c.num_recurrent_layers()) *
         (conv_bytes(c.linear, num_slots) + matrix_bytes(c.linear, num_slots));
}

StateStorage::StateStorage(Backend& backend, const ModelConfig& c, std::int64_t num_slots) : num_slots_(num_slots) {
  FOLIO_CHECK(num_slots > 0);
  const LinearAttentionConfig& a = c.linear;
  total_bytes_ = bytes_for(c, num_slots);
  if (total_bytes_ > 0) buffer_ = backend.allocate(total_bytes_);
  std::uint64_t at = 0;
  for (std::int64_t l = 0; l < c.num_recurrent_layers(); ++l) {
    RecurrentState s;
    s.conv = buffer_.view(DType::F32, {num_slots, a.conv_kernel - 1, a.conv_channels()}, at);
    at += conv_bytes(a, num_slots);
    s.state = buffer_.view(DType::F32, {num_slots, a.num_value_heads, a.key_dim, a.value_dim}, at);
    at += matrix_bytes(a, num_slots);
    layers_.push_back(s);
  }
  for (std::int64_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);
  held_.assign(static_cast<std::size_t>(num_slots), false);
}

std::int64_t StateStorage::acquire() {
  if (free_.empty()) return -1;
  const std::int64_t slot = free_.back();
  free_.pop_back();
  held_[static_cast<std::size_t>(slot)] = true;
  return slot;
}

void StateStorage::release(std::int64_t slot) {
  FOLIO_CHECK(slot >= 0 && slot < num_slots_ && held_[static_cast<std::size_t>(slot)]);
  held_[static_cast<std::size_t>(slot)] = false;
  free_.push_back(slot);
}

}  // namespace folio
