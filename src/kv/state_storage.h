// StateStorage: the per-sequence state cache of a hybrid model, beside the
// paged KV: for every linear-attention layer a RecurrentState of num_slots
// fixed-size slots (the convolution's window and the delta rule's matrices,
// f32), allocated once on the backend's device. A running sequence holds one
// slot from acquire() until release(); the bytes do not grow with context.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"

namespace folio {

class StateStorage {
 public:
  // num_slots: the most sequences that run at once (--max-num-seqs).
  StateStorage(Backend& backend, const ModelConfig& config, std::int64_t num_slots);

  std::int64_t num_slots() const { return num_slots_; }
  std::int64_t num_free() const { return static_cast<std::int64_t>(free_.size()); }
  std::uint64_t total_bytes() const { return total_bytes_; }
  std::vector<RecurrentState>& layers() { return layers_; }

  // A free slot, or -1 when every slot is held.
  std::int64_t acquire();
  // Gives a held slot back; its contents are left as they are (the next
  // sequence starts from position 0, which reads zeros instead).
  void release(std::int64_t slot);

  // Bytes num_slots slots take for this model (0 for a model without
  // linear-attention layers), under 64 bytes of alignment per array.
  static std::uint64_t bytes_for(const ModelConfig& config, std::int64_t num_slots);

 private:
  std::int64_t num_slots_;
  std::uint64_t total_bytes_ = 0;
  Buffer buffer_;
  std::vector<RecurrentState> layers_;
  std::vector<std::int64_t> free_;  // taken from the back: the lowest slot first
  std::vector<bool> held_;
};

}  // namespace folio
