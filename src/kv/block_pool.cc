#include "kv/block_pool.h"

#include "core/error.h"

namespace folio {

BlockPool::BlockPool(int num_blocks, int block_size, PrefixCacheOptions cache_options)
    : block_size_(block_size),
      ref_counts_(static_cast<std::size_t>(num_blocks), 0),
      free_(num_blocks),
      cache_(num_blocks, block_size, cache_options) {
  if (num_blocks <= 0) fail("the KV pool needs at least one block, got {}; give it more memory", num_blocks);
  if (block_size <= 0) fail("KV block size must be positive, got {}", block_size);
}

int BlockPool::ref_count(BlockId block) const {
  FOLIO_CHECK(block >= 0 && block < num_blocks());
  return ref_counts_[static_cast<std::size_t>(block)];
}

std::optional<std::vector<BlockId>> BlockPool::allocate(int n) {
  FOLIO_CHECK(n >= 0);
  if (n > free_.size()) return std::nullopt;
  std::vector<BlockId> blocks;
  blocks.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const BlockId b = free_.pop_front();
    if (cache_.is_cached(b)) {
      cache_.erase(b);
      --num_cached_free_;
      ++num_evictions_;
    }
    ref_counts_[static_cast<std::size_t>(b)] = 1;
    blocks.push_back(b);
  }
  return blocks;
}

void BlockPool::acquire(BlockId block) {
  if (ref_count(block) == 0) {
    FOLIO_CHECK(cache_.is_cached(block));  // a free block is reachable only through the cache
    free_.remove(block);
    --num_cached_free_;
  }
  ++ref_counts_[static_cast<std::size_t>(block)];
}

void BlockPool::release(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) {
    FOLIO_CHECK(ref_count(b) > 0);
    if (--ref_counts_[static_cast<std::size_t>(b)] > 0) continue;
    if (cache_.is_cached(b)) {
      free_.push_back(b);
      ++num_cached_free_;
    } else {
      free_.push_front(b);
    }
  }
}

}  // namespace folio
