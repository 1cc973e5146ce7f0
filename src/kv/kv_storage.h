// KvStorage: the memory of the paged KV cache: for every layer a K pool and a
// V pool of num_blocks fixed-size blocks (layout in backend/backend.h,
// PagedKv), allocated once on the backend's device from a byte budget.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"

namespace folio {

struct KvStorageOptions {
  std::int64_t block_size = 16;     // tokens per block
  DType dtype = DType::F16;         // f32, f16 or bf16
  std::uint64_t budget_bytes = 0;   // total bytes for K and V of all layers
  std::int64_t num_blocks = 0;      // if > 0, overrides budget_bytes
};

class KvStorage {
 public:
  KvStorage(Backend& backend, const ModelConfig& config, const KvStorageOptions& options);

  std::int64_t num_blocks() const { return num_blocks_; }
  std::int64_t block_size() const { return block_size_; }
  DType dtype() const { return dtype_; }
  // Bytes one block takes over all layers, K and V.
  std::uint64_t bytes_per_block() const { return bytes_per_block_; }
  std::uint64_t total_bytes() const { return bytes_per_block_ * static_cast<std::uint64_t>(num_blocks_); }
  std::vector<PagedKv>& layers() { return layers_; }

  // Blocks of `block_size` that fit in `budget_bytes` for this model.
  static std::int64_t blocks_for_budget(const ModelConfig& config, std::int64_t block_size, DType dtype,
                                        std::uint64_t budget_bytes);

 private:
  std::int64_t num_blocks_;
  std::int64_t block_size_;
  DType dtype_;
  std::uint64_t bytes_per_block_;
  Buffer buffer_;
  std::vector<PagedKv> layers_;
};

}  // namespace folio
