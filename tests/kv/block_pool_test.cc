// BlockPool: all-or-nothing allocation, the free queue's eviction order
// (uncached first, cached tail first), and revival of a free cached block.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace folio {
namespace {

using Blocks = std::vector<BlockId>;
using Tokens = std::vector<TokenId>;

// Caches `block` as a first block holding `tokens`.
void cache_block(BlockPool& pool, BlockId block, const Tokens& tokens) {
  PrefixCache& c = pool.cache();
  c.insert(block, c.block_hash(c.root_hash(""), tokens), PrefixCache::kRoot, c.root_hash(""), tokens, "");
}

TEST(BlockPool, AllocatesFromTheHeadAllOrNothing) {
  BlockPool pool(4, 2);
  EXPECT_EQ(pool.allocate(3), (Blocks{0, 1, 2}));
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_EQ(pool.num_used_blocks(), 3);
  EXPECT_EQ(pool.allocate(2), std::nullopt);  // running out is a normal result
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_EQ(pool.allocate(0), Blocks{});
  EXPECT_EQ(pool.allocate(1), Blocks{3});
}

TEST(BlockPool, ReleasedUncachedBlocksAreReusedFirstCachedOnesLast) {
  BlockPool pool(6, 2);
  const Blocks b = *pool.allocate(4);  // 0 1 2 3; 4 5 never used
  cache_block(pool, b[0], {1, 2});
  cache_block(pool, b[1], {3, 4});
  // A finished request gives its blocks tail first.
  pool.release(Blocks{b[3], b[2], b[1], b[0]});
  EXPECT_EQ(pool.free_queue().to_vector(), (Blocks{2, 3, 4, 5, 1, 0}));
  EXPECT_EQ(pool.num_cached_free_blocks(), 2);
  // Taking five evicts the tail block 1 but keeps the head block 0 cached.
  const Blocks again = *pool.allocate(5);
  EXPECT_EQ(again, (Blocks{2, 3, 4, 5, 1}));
  EXPECT_FALSE(pool.cache().is_cached(1));
  EXPECT_TRUE(pool.cache().is_cached(0));
  EXPECT_EQ(pool.num_cached_free_blocks(), 1);
  EXPECT_EQ(pool.num_evictions(), 1);
}

TEST(BlockPool, AcquireRevivesAFreeCachedBlock) {
  BlockPool pool(3, 2);
  const Blocks b = *pool.allocate(1);
  cache_block(pool, b[0], {5, 6});
  pool.acquire(b[0]);  // a second user while in use
  EXPECT_EQ(pool.ref_count(b[0]), 2);
  pool.release(b);
  pool.release(b);
  EXPECT_EQ(pool.ref_count(b[0]), 0);
  EXPECT_TRUE(pool.free_queue().contains(b[0]));
  pool.acquire(b[0]);  // a prefix hit on the freed block
  EXPECT_EQ(pool.ref_count(b[0]), 1);
  EXPECT_FALSE(pool.free_queue().contains(b[0]));
  EXPECT_EQ(pool.num_cached_free_blocks(), 0);
  EXPECT_EQ(pool.num_free_blocks(), 2);
}

TEST(BlockPool, MisuseIsCaught) {
  BlockPool pool(2, 2);
  EXPECT_THROW(pool.release(Blocks{0}), Error);  // not referenced
  EXPECT_THROW(pool.acquire(1), Error);          // free and not cached: unreachable
  EXPECT_THROW(pool.ref_count(2), Error);
  EXPECT_THROW(BlockPool(0, 16), Error);
}

}  // namespace
}  // namespace folio
