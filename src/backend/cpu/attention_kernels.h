// Paged attention on the CPU, tiled over the KV cache's blocks with an online
// softmax (flash style). A query's context is cut into partitions of
// kAttentionPartition positions at fixed absolute offsets; each partition is
// reduced on its own (so a long-context decode spreads over threads) and the
// partitions are merged in order. The float operations a query sees depend
// only on its position and the cached K/V - never on the batch, the chunking
// of a prefill or the thread count (DESIGN.md rule 5). Grouped-query heads
// share their K and V loads: one pass over a block serves every query head
// of its KV head.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace folio {

inline constexpr std::int64_t kAttentionPartition = 256;  // positions per partition

class CpuAttention {
 public:
  // True when this processor can run the kernels (AVX2, FMA, F16C).
  static bool supported();

  void run(ThreadPool& pool, const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
           const AttentionParams& params, Tensor& out);

 private:
  struct Item {
    std::int32_t token;
    std::int32_t seq;
    std::int32_t kv_head;
    std::int32_t partition;
    std::int64_t partial;  // index of its first partial in partials_
  };
  std::vector<Item> items_;
  std::vector<std::int64_t> first_item_;  // [num_tokens + 1] items of token t: [first_item_[t], first_item_[t + 1])
  std::vector<float> partials_;           // per item and query head: m, l, acc[value_head_dim]
};

}  // namespace folio
