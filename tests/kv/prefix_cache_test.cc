// PrefixCache: chained lookups, deduplication, and hashes forced equal that
// still never serve another prefix's block.
#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace folio {
namespace {

using Tokens = std::vector<TokenId>;
using Entry = PrefixCache::EntryId;
constexpr Entry kRoot = PrefixCache::kRoot;

TEST(PrefixCache, FindsAChainBlockByBlock) {
  PrefixCache c(8, 2);
  const BlockHash h0 = c.block_hash(c.root_hash("s"), Tokens{1, 2});
  const BlockHash h1 = c.block_hash(h0, Tokens{3, 4});
  const Entry e0 = c.insert(5, h0, kRoot, c.root_hash("s"), Tokens{1, 2}, "s");
  const Entry e1 = c.insert(6, h1, e0, h0, Tokens{3, 4}, "s");
  EXPECT_NE(e0, e1);
  EXPECT_EQ(c.num_cached_blocks(), 2);
  auto m0 = c.lookup(h0, kRoot, Tokens{1, 2}, "s");
  ASSERT_TRUE(m0.has_value());
  EXPECT_EQ(m0->block, 5);
  auto m1 = c.lookup(h1, m0->entry, Tokens{3, 4}, "s");
  ASSERT_TRUE(m1.has_value());
  EXPECT_EQ(m1->block, 6);
  EXPECT_EQ(c.tokens_of(6)[1], 4);
  EXPECT_FALSE(c.lookup(h0, kRoot, Tokens{1, 2}, "t"));  // another salt
}

TEST(PrefixCache, DuplicateContentReturnsTheExistingEntry) {
  PrefixCache c(8, 2);
  const BlockHash h = c.block_hash(c.root_hash(""), Tokens{1, 2});
  const Entry e = c.insert(1, h, kRoot, c.root_hash(""), Tokens{1, 2}, "");
  EXPECT_EQ(c.insert(2, h, kRoot, c.root_hash(""), Tokens{1, 2}, ""), e);
  EXPECT_FALSE(c.is_cached(2));
  EXPECT_EQ(c.num_cached_blocks(), 1);
}

// With hashes forced equal, only the stored tokens, salt and parent entry
// decide, and each of them alone refuses a wrong block.
TEST(PrefixCache, EqualHashesNeverServeOtherContent) {
  PrefixCache c(8, 2);
  const BlockHash same{42, 42};
  const Entry a = c.insert(0, same, kRoot, BlockHash{}, Tokens{1, 2}, "");
  const Entry b = c.insert(1, same, a, same, Tokens{3, 4}, "");
  EXPECT_EQ(c.stats().num_collisions, 1);  // b met a's other tokens under the same hash
  EXPECT_FALSE(c.lookup(same, kRoot, Tokens{9, 9}, ""));   // tokens differ
  EXPECT_FALSE(c.lookup(same, kRoot, Tokens{1, 2}, "x"));  // salt differs
  EXPECT_FALSE(c.lookup(same, kRoot, Tokens{3, 4}, ""));   // right tokens, wrong parent
  EXPECT_FALSE(c.lookup(same, b, Tokens{3, 4}, ""));       // wrong parent again
  EXPECT_EQ(c.lookup(same, kRoot, Tokens{1, 2}, "")->block, 0);
  EXPECT_EQ(c.lookup(same, a, Tokens{3, 4}, "")->block, 1);
  EXPECT_GE(c.stats().num_collisions, 4);
}

// A child whose parent was evicted is unreachable; the same content under a
// new parent entry is cached beside it, and the old one can be erased.
TEST(PrefixCache, ReCachesUnderANewParentEntry) {
  PrefixCache c(8, 2);
  const BlockHash h0 = c.block_hash(c.root_hash(""), Tokens{1, 2});
  const BlockHash h1 = c.block_hash(h0, Tokens{3, 4});
  const Entry old_parent = c.insert(0, h0, kRoot, c.root_hash(""), Tokens{1, 2}, "");
  c.insert(1, h1, old_parent, h0, Tokens{3, 4}, "");
  c.erase(0);
  const Entry new_parent = c.insert(2, h0, kRoot, c.root_hash(""), Tokens{1, 2}, "");
  EXPECT_NE(new_parent, old_parent);  // entries are never reused
  EXPECT_FALSE(c.lookup(h1, new_parent, Tokens{3, 4}, ""));
  const Entry child = c.insert(3, h1, new_parent, h0, Tokens{3, 4}, "");
  EXPECT_EQ(c.lookup(h1, new_parent, Tokens{3, 4}, "")->block, 3);
  EXPECT_EQ(c.stats().num_collisions, 0);  // a stale copy is not a collision
  c.erase(1);
  EXPECT_EQ(c.lookup(h1, new_parent, Tokens{3, 4}, "")->entry, child);
  EXPECT_EQ(c.num_cached_blocks(), 2);
}

// KV events: each hash that joins or leaves the cached set is told once, a
// chain's blocks in one event; the re-cached copy above is not news.
TEST(PrefixCache, LogsEachHashJoiningAndLeavingOnce) {
  PrefixCache c(8, 2);
  c.record_events(true);
  const BlockHash h0 = c.block_hash(c.root_hash(""), Tokens{1, 2});
  const BlockHash h1 = c.block_hash(h0, Tokens{3, 4});
  const Entry old_parent = c.insert(0, h0, kRoot, c.root_hash(""), Tokens{1, 2}, "");
  c.insert(1, h1, old_parent, h0, Tokens{3, 4}, "");
  auto events = c.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, KvEvent::Kind::kStored);
  EXPECT_EQ(events[0].block_hashes, (std::vector<std::uint64_t>{h0.lo, h1.lo}));
  EXPECT_FALSE(events[0].parent_block_hash.has_value());  // a first block
  EXPECT_EQ(events[0].token_ids, (Tokens{1, 2, 3, 4}));
  EXPECT_EQ(events[0].block_size, 2);
  EXPECT_EQ(c.num_cached_hashes(), 2);

  c.erase(0);
  const Entry new_parent = c.insert(2, h0, kRoot, c.root_hash(""), Tokens{1, 2}, "");
  c.insert(3, h1, new_parent, h0, Tokens{3, 4}, "");  // h1 is still held by block 1
  events = c.take_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, KvEvent::Kind::kRemoved);
  EXPECT_EQ(events[0].block_hashes, (std::vector<std::uint64_t>{h0.lo}));
  EXPECT_EQ(events[1].kind, KvEvent::Kind::kStored);
  EXPECT_EQ(events[1].block_hashes, (std::vector<std::uint64_t>{h0.lo}));
  EXPECT_EQ(c.num_cached_blocks(), 3);
  EXPECT_EQ(c.num_cached_hashes(), 2);

  c.erase(1);  // one copy of h1 left: no event
  EXPECT_TRUE(c.take_events().empty());
  c.erase(3);
  c.erase(2);
  events = c.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].block_hashes, (std::vector<std::uint64_t>{h1.lo, h0.lo}));
  EXPECT_EQ(c.num_cached_hashes(), 0);

  const BlockHash h2 = c.block_hash(h1, Tokens{5, 6});
  c.insert(4, h2, 7, h1, Tokens{5, 6}, "");  // a parent that is not the last block stored
  events = c.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].parent_block_hash, h1.lo);
}

TEST(PrefixCache, LogsNothingUnlessAsked) {
  PrefixCache c(4, 2);
  c.insert(0, c.block_hash(c.root_hash(""), Tokens{1, 2}), kRoot, c.root_hash(""), Tokens{1, 2}, "");
  c.erase(0);
  EXPECT_TRUE(c.take_events().empty());
  EXPECT_EQ(c.num_cached_hashes(), 0);
}

TEST(PrefixCache, CountsQueriesAndHits) {
  PrefixCache c(4, 16);
  c.record_query(100, 0);
  c.record_query(50, 32);
  EXPECT_EQ(c.stats().num_queries, 2);
  EXPECT_EQ(c.stats().num_hits, 1);
  EXPECT_EQ(c.stats().num_queried_tokens, 150);
  EXPECT_EQ(c.stats().num_hit_tokens, 32);
  EXPECT_DOUBLE_EQ(c.stats().token_hit_rate(), 32.0 / 150.0);
}

TEST(PrefixCache, MisuseIsCaught) {
  PrefixCache c(2, 2);
  EXPECT_THROW(c.erase(0), Error);  // not cached
  const BlockHash h{1, 1};
  c.insert(0, h, kRoot, BlockHash{}, Tokens{1, 2}, "");
  EXPECT_THROW(c.insert(0, BlockHash{2, 2}, kRoot, BlockHash{}, Tokens{5, 6}, ""), Error);  // already cached
  EXPECT_THROW(c.lookup(h, kRoot, Tokens{1}, ""), Error);  // not a full block
}

}  // namespace
}  // namespace folio
