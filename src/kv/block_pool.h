// BlockPool: a fixed number of KV blocks of block_size tokens, with reference
// counts. Invariant: a block is in the free queue exactly when its count is
// zero; cached free blocks keep their prefix-cache entry until handed out.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/free_block_queue.h"
#include "kv/kv_types.h"
#include "kv/prefix_cache.h"

namespace folio {

class BlockPool {
 public:
  BlockPool(int num_blocks, int block_size, PrefixCacheOptions cache_options = {});

  int num_blocks() const { return static_cast<int>(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  int num_free_blocks() const { return free_.size(); }  // ref 0: unused, freed or cached
  int num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  int num_cached_free_blocks() const { return num_cached_free_; }  // evictable hits
  int ref_count(BlockId block) const;
  std::int64_t num_evictions() const { return num_evictions_; }  // cached blocks handed out again

  // Takes n blocks from the head of the free queue, each with count 1; a
  // cached block taken leaves the prefix cache. nullopt, and nothing
  // changes, when fewer than n blocks are free.
  std::optional<std::vector<BlockId>> allocate(int n);

  // One more reference (a prefix hit or a fork); a free cached block is
  // revived: it leaves the free queue.
  void acquire(BlockId block);

  // Drops one reference from each block. Blocks that reach zero join the
  // free queue: uncached ones at the head (nothing to keep), cached ones at
  // the tail in the order given, so the first given is evicted first. A
  // finished request passes its blocks tail first.
  void release(std::span<const BlockId> blocks);

  PrefixCache& cache() { return cache_; }
  const PrefixCache& cache() const { return cache_; }
  const FreeBlockQueue& free_queue() const { return free_; }

 private:
  int block_size_;
  std::vector<int> ref_counts_;  // [num_blocks]
  FreeBlockQueue free_;
  PrefixCache cache_;
  int num_cached_free_ = 0;
  std::int64_t num_evictions_ = 0;
};

}  // namespace folio
