// KvStorage: the memory of the paged KV cache: for every layer that writes
// one a K pool and a V pool of num_blocks fixed-size blocks (a layer that
// reads an earlier layer's cache, as Gemma 4's last layers do, shares its
// pools) (layout in backend/kv_pool.h: codes
// and, for the scaled types, their scales beside them), allocated once on the
// backend's device from a byte budget that counts every byte, scales included.
// A hybrid model's linear-attention layers keep none (their entry of layers()
// has no pools): their state is kv/StateStorage's.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/model_config.h"
#include "tensor/kv_dtype.h"

namespace folio {

struct KvStorageOptions {
  std::int64_t block_size = kDefaultBlockSize;  // tokens per block
  KvCacheDType dtype;               // K and V types (f16 both by default)
  std::uint64_t budget_bytes = 0;   // total bytes for K and V of all layers
  std::int64_t num_blocks = 0;      // if > 0, overrides budget_bytes
};

class KvStorage {
 public:
  KvStorage(Backend& backend, const ModelConfig& config, const KvStorageOptions& options);

  std::int64_t num_blocks() const { return num_blocks_; }
  std::int64_t block_size() const { return block_size_; }
  KvCacheDType dtype() const { return dtype_; }
  // Bytes one block takes over all layers, K and V, codes and scales.
  std::uint64_t bytes_per_block() const { return bytes_per_block_; }
  // Every byte of the pools: whole blocks, plus under 64 bytes of alignment
  // per array (codes, scales) of a pool; never more than the budget.
  std::uint64_t total_bytes() const { return total_bytes_; }
  // Per layer, the pools it attends over (a shared layer's are its source's).
  std::vector<PagedKv>& layers() { return layers_; }
  // Each pool once: the writing layers' (what block copies go over).
  std::vector<PagedKv>& pools() { return pools_; }

  // Bytes one block takes for this model: all writing layers, K and V, with
  // scales.
  static std::uint64_t block_bytes(const ModelConfig& config, std::int64_t block_size, KvCacheDType dtype);
  // Blocks of `block_size` that fit in `budget_bytes` for this model,
  // alignment included.
  static std::int64_t blocks_for_budget(const ModelConfig& config, std::int64_t block_size, KvCacheDType dtype,
                                        std::uint64_t budget_bytes);

 private:
  std::int64_t num_blocks_;
  std::int64_t block_size_;
  KvCacheDType dtype_;
  std::uint64_t bytes_per_block_;
  std::uint64_t total_bytes_ = 0;
  Buffer buffer_;
  std::vector<PagedKv> layers_;
  std::vector<PagedKv> pools_;
};

}  // namespace folio
