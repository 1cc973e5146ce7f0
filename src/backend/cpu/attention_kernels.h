// Paged attention on the CPU, tiled over the KV cache's blocks with an online
// softmax (flash style). A query's context is cut into partitions of
// kAttentionPartition positions at fixed absolute offsets; each partition is
// reduced on its own (so a long-context decode spreads over threads) and the
// partitions are merged in order, an attention sink (gpt-oss) last. The float operations a query sees depend
// only on its position and the cached K/V - never on the batch, the chunking
// of a prefill or the thread count (docs/architecture.md rule 5). Grouped-query heads
// share their K and V loads: one pass over a block serves every query head
// of its KV head, and one pass serves up to eight query tokens of a sequence
// (prefill chunks, speculative verification), each with its own operations.
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
  struct Item {  // a pass over one partition of one KV head
    std::int32_t token;       // the first of the sequence's query tokens it serves
    std::int32_t num_tokens;  // consecutive query tokens (those whose context reaches the partition take part)
    std::int32_t seq;
    std::int32_t kv_head;
    std::int32_t partition;
  };
  std::vector<Item> items_;
  std::vector<std::int64_t> partial_base_;  // [num_tokens + 1] token t's partials start at partial_base_[t]
  std::vector<float> partials_;             // per token, KV head, partition, query head: m, l, acc[value_head_dim]
};

}  // namespace folio
