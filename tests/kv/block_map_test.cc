// block_map: a sequence's blocks show as in use, its full committed blocks as
// shared (in the prefix cache), and once it is freed those stay as cached
// hits while the rest turn free; a hit takes the cached block back.
#include "kv/block_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace folio {
namespace {

std::vector<TokenId> tokens(int n) {
  std::vector<TokenId> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), 100);
  return t;
}

TEST(BlockMap, FollowsASequenceThroughThePrefixCache) {
  KvCacheConfig config;
  config.num_blocks = 4;
  config.block_size = 4;
  KvCacheManager kv(config);
  EXPECT_EQ(block_map(kv.pool()), "ffff");

  const std::vector<TokenId> prompt = tokens(6);  // one full block and a partial one
  ASSERT_TRUE(kv.allocate_slots(1, 6, kv.find_cached_prefix(prompt)));
  EXPECT_EQ(block_map(kv.pool()), "uuff");
  kv.commit(1, prompt);  // the full block enters the prefix cache
  EXPECT_EQ(block_map(kv.pool()), "suff");

  kv.free(1);
  EXPECT_EQ(block_map(kv.pool()), "cfff");

  // The same prompt again: the cached block is a hit and in use once more.
  const PrefixHit hit = kv.find_cached_prefix(prompt);
  ASSERT_EQ(hit.num_computed_tokens, 4);
  ASSERT_TRUE(kv.allocate_slots(2, 2, hit));
  const std::string map = block_map(kv.pool());
  EXPECT_EQ(map[0], kBlockShared);
  EXPECT_EQ(std::count(map.begin(), map.end(), kBlockInUse), 1);
  EXPECT_EQ(std::count(map.begin(), map.end(), kBlockFree), 2);
}

}  // namespace
}  // namespace folio
