// KvCacheManager scenarios, one row each: a small pool (block size 4), a
// script of scheduler calls, and what must hold. Every call in a script also
// checks every invariant (KvTestDriver::check).
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/kv_test_driver.h"

namespace folio {
namespace {

using testing::KvTestDriver;
using Blocks = std::vector<BlockId>;

constexpr int kBs = 4;

// Tokens first, first + 1, ..., first + n - 1.
std::vector<TokenId> seq(TokenId first, int n) {
  std::vector<TokenId> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<TokenId> cat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Blocks table(KvTestDriver& d, SequenceId id) { return d.kv().block_table(id).blocks(); }
Blocks first(const Blocks& b, int n) { return Blocks(b.begin(), b.begin() + n); }
int ref(KvTestDriver& d, BlockId b) { return d.kv().pool().ref_count(b); }
Blocks free_queue(KvTestDriver& d) { return d.kv().pool().free_queue().to_vector(); }

KvCacheConfig pool(int num_blocks, int hash_bits = 128) {
  KvCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = kBs;
  c.cache_options.hash_bits = hash_bits;
  return c;
}

struct Scenario {
  std::string name;
  KvCacheConfig config;
  std::function<void(KvTestDriver&)> run;
};

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.name; }

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = {
      {"HitOnSharedPrefix", pool(16),
       [](KvTestDriver& d) {
         EXPECT_EQ(d.admit(1, seq(0, 10)), 0);  // 2 full blocks + 2 tokens
         // Same first 8 tokens, then its own: the 2 full blocks are shared.
         EXPECT_EQ(d.admit(2, cat(seq(0, 8), seq(50, 3))), 8);
         EXPECT_EQ(first(table(d, 2), 2), first(table(d, 1), 2));
         EXPECT_NE(table(d, 2)[2], table(d, 1)[2]);
         // Differs inside the second block: only the first is shared.
         EXPECT_EQ(d.admit(3, cat(seq(0, 6), seq(70, 6))), 4);
         EXPECT_EQ(table(d, 3)[0], table(d, 1)[0]);
         const auto& stats = d.kv().prefix_cache_stats();
         EXPECT_EQ(stats.num_queries, 3);
         EXPECT_EQ(stats.num_hits, 2);
         EXPECT_EQ(stats.num_queried_tokens, 10 + 11 + 12);
         EXPECT_EQ(stats.num_hit_tokens, 8 + 4);
       }},
      {"WholePromptCachedStillRecomputesLastToken", pool(16),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 8));
         EXPECT_EQ(d.kv().usage().num_cached_blocks, 2);
         // 8 cached tokens, but the last one must run to give logits: the
         // second block is recomputed, so only 4 come from the cache.
         EXPECT_EQ(d.admit(2, seq(0, 8)), 4);
         EXPECT_EQ(d.admit(3, seq(0, 9)), 8);
         EXPECT_EQ(d.admit(4, seq(0, 1)), 0);
       }},
      {"RefCountsOnSharing", pool(16),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 9));
         d.admit(2, seq(0, 9));
         d.admit(3, cat(seq(0, 4), seq(90, 2)));
         const Blocks a = table(d, 1);
         EXPECT_EQ(ref(d, a[0]), 3);
         EXPECT_EQ(ref(d, a[1]), 2);
         EXPECT_EQ(ref(d, a[2]), 1);
         d.free(1);
         EXPECT_EQ(ref(d, a[0]), 2);
         EXPECT_EQ(ref(d, a[1]), 1);
         EXPECT_EQ(ref(d, a[2]), 0);  // A's partial block: free at once
         d.free(2);
         d.free(3);
         EXPECT_EQ(ref(d, a[0]), 0);
         EXPECT_EQ(d.kv().usage().num_used_blocks, 0);
         EXPECT_EQ(d.kv().usage().num_cached_free_blocks, 2);
       }},
      {"FinishedRequestIsEvictedTailFirst", pool(8),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 13));  // a0 a1 a2 cached, a3 partial
         const Blocks a = table(d, 1);
         d.free(1);
         // Uncached a3 first, then the never-used blocks, then A's cached
         // blocks tail first.
         EXPECT_EQ(free_queue(d), (Blocks{a[3], 4, 5, 6, 7, a[2], a[1], a[0]}));
         // Taking 6 blocks evicts a3, the 4 unused and a2: the head of A's
         // prompt (a0 a1) is still a hit.
         d.admit(2, seq(100, 24));
         EXPECT_EQ(d.kv().usage().num_cached_free_blocks, 2);
         d.free(2);
         EXPECT_EQ(d.admit(3, seq(0, 13)), 8);
         EXPECT_EQ(first(table(d, 3), 2), first(a, 2));
       }},
      {"LeastRecentlyFreedIsEvictedFirst", pool(8),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 8));
         d.admit(2, seq(100, 8));
         const Blocks a = table(d, 1);
         const Blocks b = table(d, 2);
         d.free(1);
         d.free(2);
         EXPECT_EQ(free_queue(d), (Blocks{4, 5, 6, 7, a[1], a[0], b[1], b[0]}));
         d.admit(3, seq(200, 24));  // 6 blocks: A's 2 go, B's stay
         EXPECT_EQ(d.kv().usage().num_cached_free_blocks, 2);
         d.free(3);
         EXPECT_EQ(d.admit(4, seq(100, 9)), 8);
         EXPECT_EQ(d.admit(5, seq(0, 9)), 0);
       }},
      {"RevivalOfFreedCachedBlock", pool(8),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 8));
         const Blocks a = table(d, 1);
         d.free(1);
         EXPECT_EQ(d.kv().usage().num_free_blocks, 8);
         EXPECT_EQ(d.admit(2, cat(seq(0, 4), seq(50, 2))), 4);
         // a0 left the free queue and has one reference again.
         EXPECT_EQ(ref(d, a[0]), 1);
         EXPECT_FALSE(d.kv().pool().free_queue().contains(a[0]));
         EXPECT_TRUE(d.kv().pool().cache().is_cached(a[0]));
         EXPECT_EQ(d.kv().usage().num_free_blocks, 6);  // a0 revived, one new block
         EXPECT_EQ(d.kv().usage().num_cached_free_blocks, 1);  // a1
         d.free(2);
         // Freed again, a0 is now the most recently used: it goes last.
         EXPECT_EQ(free_queue(d).back(), a[0]);
       }},
      {"TenantSaltsNeverShare", pool(16),
       [](KvTestDriver& d) {
         EXPECT_EQ(d.admit(1, seq(0, 9), "tenant-a"), 0);
         EXPECT_EQ(d.admit(2, seq(0, 9), "tenant-b"), 0);
         EXPECT_EQ(d.admit(3, seq(0, 9), ""), 0);
         EXPECT_EQ(d.admit(4, seq(0, 9), "tenant-a"), 8);
         EXPECT_EQ(first(table(d, 4), 2), first(table(d, 1), 2));
         EXPECT_EQ(d.admit(5, seq(0, 9), "tenant-b"), 8);
         EXPECT_EQ(first(table(d, 5), 2), first(table(d, 2), 2));
         EXPECT_EQ(d.admit(6, seq(0, 9)), 8);
         EXPECT_EQ(first(table(d, 6), 2), first(table(d, 3), 2));
       }},
      {"ForcedHashCollisionNeverServesWrongBlocks", pool(16, /*hash_bits=*/0),
       [](KvTestDriver& d) {
         // Every block hashes to the same value.
         d.admit(1, seq(0, 9));
         EXPECT_EQ(d.kv().usage().num_cached_blocks, 2);
         const auto& stats = d.kv().prefix_cache_stats();
         EXPECT_EQ(stats.num_collisions, 1);  // A's second block met its first
         // Other tokens, same hash: refused, and counted.
         EXPECT_EQ(d.admit(2, seq(50, 9)), 0);
         EXPECT_GE(stats.num_collisions, 2);
         // Same tokens under another salt: refused too.
         EXPECT_EQ(d.admit(3, seq(0, 9), "other"), 0);
         // A's second block's tokens as a first block: refused (other parent).
         EXPECT_EQ(d.admit(4, cat(seq(4, 4), seq(0, 5))), 0);
         // The true owner still hits, block for block.
         EXPECT_EQ(d.admit(5, seq(0, 9)), 8);
         EXPECT_EQ(first(table(d, 5), 2), first(table(d, 1), 2));
         EXPECT_EQ(d.admit(6, seq(50, 9)), 8);
         EXPECT_EQ(first(table(d, 6), 2), first(table(d, 2), 2));
       }},
      {"StaleCopyDoesNotBlockRecaching", pool(6),
       [](KvTestDriver& d) {
         const auto prompt = cat(seq(0, 4), seq(50, 5));  // X, Y, one more
         d.admit(1, seq(0, 5), "", /*chunk=*/3);
         d.admit(2, prompt, "", /*chunk=*/3);
         EXPECT_TRUE(d.prefill(1, 2));  // caches X
         EXPECT_TRUE(d.prefill(2, 1));  // computed X too: a duplicate, not cached
         EXPECT_EQ(d.kv().usage().num_cached_blocks, 1);
         d.free(1);
         d.admit(3, seq(100, 20));  // evicts X
         d.free(3);
         // Y enters the cache under X's evicted entry: unreachable.
         EXPECT_TRUE(d.prefill(2, 5));
         d.free(2);
         EXPECT_EQ(d.admit(4, prompt), 0);
         // X and Y computed again are cached again despite the stale Y.
         EXPECT_EQ(d.admit(5, prompt), 8);
       }},
      {"RunningOutChangesNothing", pool(4),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 12));  // 3 blocks
         const KvUsage before = d.kv().usage();
         EXPECT_EQ(d.admit(2, seq(100, 8)), std::nullopt);  // needs 2, 1 free
         EXPECT_FALSE(d.kv().contains(2));
         EXPECT_EQ(d.kv().usage().num_free_blocks, before.num_free_blocks);
         EXPECT_EQ(d.kv().num_blocks_needed(1, 4), 1);
         EXPECT_TRUE(d.append(1, seq(12, 4), true));  // the last block
         EXPECT_EQ(d.kv().usage().num_free_blocks, 0);
         EXPECT_FALSE(d.append(1, seq(16, 1), true));
         EXPECT_EQ(d.kv().num_tokens(1), 16);
         EXPECT_EQ(table(d, 1).size(), 4u);
       }},
      {"RevivedHitBlocksCountAgainstTheFreePool", pool(5),
       [](KvTestDriver& d) {
         d.admit(9, seq(500, 4));  // holds one block throughout
         d.admit(1, seq(0, 9));    // a0 a1 cached, a2 partial
         d.free(1);
         EXPECT_EQ(d.kv().usage().num_free_blocks, 4);
         // A hit on a0 a1 plus 9 new tokens needs 5 blocks: 3 new and the 2
         // revived ones, but only 4 are free.
         EXPECT_EQ(d.admit(2, cat(seq(0, 8), seq(60, 9))), std::nullopt);
         EXPECT_EQ(d.kv().usage().num_cached_free_blocks, 2);
         EXPECT_EQ(d.admit(2, cat(seq(0, 8), seq(60, 8))), 8);  // 4 blocks: fits
         EXPECT_EQ(d.kv().usage().num_free_blocks, 0);
       }},
      {"RollbackFreesEmptiedBlocks", pool(8),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 6));  // 2 blocks
         EXPECT_TRUE(d.append(1, seq(6, 7), /*verified=*/false));  // 13 tokens, 4 blocks
         const Blocks t = table(d, 1);
         EXPECT_EQ(t.size(), 4u);
         EXPECT_EQ(d.kv().usage().num_cached_blocks, 1);  // only the prompt's full block
         d.accept(1, 1);  // 7 tokens stay, 6 rolled back
         EXPECT_EQ(table(d, 1), first(t, 2));
         EXPECT_EQ(free_queue(d)[0], t[2]);  // uncached: reused first
         EXPECT_EQ(free_queue(d)[1], t[3]);
         EXPECT_EQ(d.kv().usage().num_empty_slots, 1);
         EXPECT_THROW(d.kv().rollback(1, 1), Error);  // all 7 are verified
         EXPECT_THROW(d.kv().commit(1, seq(0, 6)), Error);  // verified tokens are final
       }},
      {"UnverifiedTokensNeverEnterTheCache", pool(8),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 3));
         EXPECT_TRUE(d.append(1, seq(3, 6), /*verified=*/false));  // block 0 full, 1 token unverified
         EXPECT_EQ(d.kv().usage().num_cached_blocks, 0);
         EXPECT_EQ(d.kv().find_cached_prefix(seq(0, 9)).num_computed_tokens, 0);
         d.accept(1, 1);  // now block 0 holds 4 verified tokens
         EXPECT_EQ(d.kv().usage().num_cached_blocks, 1);
         EXPECT_EQ(d.admit(3, seq(0, 9)), 4);
       }},
      {"ForkSharesFullBlocksAndCopiesThePartialOne", pool(12),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 10));
         const Blocks a = table(d, 1);
         auto copies = d.fork(1, 2);
         ASSERT_TRUE(copies.has_value());
         const Blocks b = table(d, 2);
         EXPECT_EQ(first(b, 2), first(a, 2));
         EXPECT_EQ(*copies, (std::vector<BlockCopy>{{a[2], b[2]}}));
         EXPECT_EQ(ref(d, a[0]), 2);
         EXPECT_EQ(ref(d, a[2]), 1);
         EXPECT_EQ(ref(d, b[2]), 1);
         // Each writes its own partial block and diverges.
         EXPECT_TRUE(d.append(1, seq(10, 3), true));
         EXPECT_TRUE(d.append(2, seq(80, 3), true));
         EXPECT_EQ(d.admit(3, cat(seq(0, 12), {0})), 12);
         EXPECT_EQ(d.admit(4, cat(cat(seq(0, 10), seq(80, 2)), {0})), 12);
         EXPECT_NE(table(d, 3)[2], table(d, 4)[2]);
       }},
      {"ForkAtABlockBoundaryCopiesNothing", pool(8),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 8));
         auto copies = d.fork(1, 2);
         ASSERT_TRUE(copies.has_value());
         EXPECT_TRUE(copies->empty());
         EXPECT_EQ(table(d, 2), table(d, 1));
         EXPECT_TRUE(d.append(2, seq(40, 1), true));  // a new block of its own
         EXPECT_EQ(ref(d, table(d, 2)[2]), 1);
       }},
      {"ForkNeedsAFreeBlockAndVerifiedTokens", pool(3),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 10));  // all 3 blocks
         EXPECT_EQ(d.fork(1, 2), std::nullopt);
         EXPECT_FALSE(d.kv().contains(2));
         EXPECT_EQ(ref(d, table(d, 1)[0]), 1);
         EXPECT_TRUE(d.append(1, seq(10, 1), /*verified=*/false));
         EXPECT_THROW(d.kv().fork(1, 2), Error);
       }},
      {"AbortWithUnverifiedTokensReturnsEverything", pool(6),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 6), "", /*chunk=*/3);  // chunked prefill
         EXPECT_TRUE(d.prefill(1, 3));
         EXPECT_TRUE(d.append(1, seq(6, 5), false));
         d.free(1);
         const KvUsage u = d.kv().usage();
         EXPECT_EQ(u.num_free_blocks, 6);
         EXPECT_EQ(u.num_cached_blocks, 1);
         EXPECT_EQ(u.num_empty_slots, 0);
         EXPECT_FALSE(d.kv().free(1));
       }},
      {"NoPrefixCaching", [] {
         KvCacheConfig c = pool(8);
         c.enable_prefix_caching = false;
         return c;
       }(),
       [](KvTestDriver& d) {
         d.admit(1, seq(0, 9));
         EXPECT_EQ(d.admit(2, seq(0, 9)), 0);
         EXPECT_EQ(d.kv().usage().num_cached_blocks, 0);
         EXPECT_EQ(d.kv().prefix_cache_stats().num_queries, 0);
       }},
  };
  return all;
}

class KvScenarioTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(KvScenarioTest, Runs) {
  KvTestDriver driver(GetParam().config);
  GetParam().run(driver);
  EXPECT_TRUE(driver.check()) << driver.error();
}

INSTANTIATE_TEST_SUITE_P(Scenarios, KvScenarioTest, ::testing::ValuesIn(scenarios()),
                         [](const auto& row) { return row.param.name; });

TEST(KvCacheManager, SlotMappingFollowsTheBlockTable) {
  KvCacheManager kv(pool(8));
  ASSERT_TRUE(kv.allocate_slots(7, 6, kv.find_cached_prefix(seq(0, 6))));
  const Blocks t = kv.block_table(7).blocks();
  std::vector<SlotId> slots;
  kv.slot_mapping(7, 0, 6, slots);
  EXPECT_EQ(slots, (std::vector<SlotId>{t[0] * kBs + 0, t[0] * kBs + 1, t[0] * kBs + 2, t[0] * kBs + 3,
                                        t[1] * kBs + 0, t[1] * kBs + 1}));
  EXPECT_THROW(kv.slot_mapping(7, 0, 7, slots), Error);
  EXPECT_EQ(kv.usage().num_empty_slots, 2);
  EXPECT_DOUBLE_EQ(kv.usage().empty_slot_fraction(), 2.0 / 8.0);
}

TEST(KvCacheManager, MisuseIsAnErrorThatSaysWhatToDo) {
  KvCacheManager kv(pool(8));
  try {
    kv.allocate_slots(3, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("find_cached_prefix"), std::string::npos) << e.what();
  }
  ASSERT_TRUE(kv.allocate_slots(3, 2, kv.find_cached_prefix(seq(0, 2))));
  EXPECT_THROW(kv.allocate_slots(3, 2, kv.find_cached_prefix(seq(0, 2))), Error);
  EXPECT_THROW(kv.commit(3, seq(0, 3)), Error);  // only 2 slots
}

TEST(KvCacheManager, StaleHitIsRefused) {
  KvCacheManager kv(pool(2));
  ASSERT_TRUE(kv.allocate_slots(1, 5, kv.find_cached_prefix(seq(0, 5))));
  kv.commit(1, seq(0, 5));
  kv.free(1);
  const PrefixHit hit = kv.find_cached_prefix(seq(0, 5));
  ASSERT_EQ(hit.num_computed_tokens, 4);
  // Another request takes both blocks, evicting the hit.
  ASSERT_TRUE(kv.allocate_slots(2, 8, kv.find_cached_prefix(seq(100, 8))));
  EXPECT_THROW(kv.allocate_slots(3, 1, hit), Error);
}

}  // namespace
}  // namespace folio
