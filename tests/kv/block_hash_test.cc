// BlockHash: deterministic, sensitive to every input (tokens, order, length,
// salt, parent), and free of collisions over many random blocks.
#include "kv/block_hash.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_set>
#include <vector>

namespace folio {
namespace {

using Tokens = std::vector<TokenId>;

TEST(BlockHash, IsDeterministic) {
  const Tokens t = {1, 2, 3, 4};
  EXPECT_EQ(hash_block(hash_root(""), t), hash_block(hash_root(""), t));
  EXPECT_EQ(hash_root("tenant"), hash_root("tenant"));
}

TEST(BlockHash, DependsOnEveryInput) {
  const BlockHash root = hash_root("");
  const BlockHash h = hash_block(root, Tokens{1, 2, 3, 4});
  EXPECT_NE(h, hash_block(root, Tokens{1, 2, 3, 5}));             // a token
  EXPECT_NE(h, hash_block(root, Tokens{2, 1, 3, 4}));             // order
  EXPECT_NE(h, hash_block(root, Tokens{1, 2, 3}));                // length
  EXPECT_NE(hash_block(root, Tokens{1, 2, 3}), hash_block(root, Tokens{1, 2, 3, 0}));  // trailing zero
  EXPECT_NE(h, hash_block(hash_root("a"), Tokens{1, 2, 3, 4}));   // salt
  EXPECT_NE(hash_root(""), hash_root(std::string(1, '\0')));      // salt length
  EXPECT_NE(h, hash_block(h, Tokens{1, 2, 3, 4}));                // parent
  EXPECT_NE(hash_block(root, Tokens{-1}), hash_block(root, Tokens{0x7fffffff}));
}

// 200,000 random blocks, including many one-token-apart neighbours: no two
// share even their low 64 bits, nor their high 64 bits.
TEST(BlockHash, NoCollisionsAmongManyBlocks) {
  std::mt19937_64 rng(11);
  std::unordered_set<std::uint64_t> lo, hi;
  BlockHash parent = hash_root("");
  Tokens t(16);
  for (int i = 0; i < 200000; ++i) {
    if (i % 2 == 0) {
      for (auto& x : t) x = static_cast<TokenId>(rng() % 50000);
    } else {
      t[rng() % t.size()] ^= 1;  // a near neighbour of the previous block
    }
    const BlockHash h = hash_block(parent, t);
    ASSERT_TRUE(lo.insert(h.lo).second) << i;
    ASSERT_TRUE(hi.insert(h.hi).second) << i;
    if (i % 16 == 15) parent = h;
  }
}

// One flipped input bit flips about half the output bits.
TEST(BlockHash, Avalanches) {
  const BlockHash root = hash_root("");
  Tokens t(16, 0);
  const BlockHash base = hash_block(root, t);
  double total = 0;
  int n = 0;
  for (std::size_t i = 0; i < t.size(); ++i)
    for (int bit = 0; bit < 32; ++bit) {
      Tokens u = t;
      u[i] ^= static_cast<TokenId>(1u << bit);
      const BlockHash h = hash_block(root, u);
      total += __builtin_popcountll(h.lo ^ base.lo) + __builtin_popcountll(h.hi ^ base.hi);
      ++n;
    }
  EXPECT_NEAR(total / n, 64.0, 2.0);
}

TEST(BlockHash, TruncatesForTests) {
  const BlockHash h{0xFFFF'FFFF'FFFF'FFFFull, 0xFFFF'FFFF'FFFF'FFFFull};
  EXPECT_EQ(h.truncated(128), h);
  EXPECT_EQ(h.truncated(0), BlockHash{});
  EXPECT_EQ(h.truncated(3), (BlockHash{7, 0}));
  EXPECT_EQ(h.truncated(64), (BlockHash{h.lo, 0}));
  EXPECT_EQ(h.truncated(65), (BlockHash{h.lo, 1}));
}

}  // namespace
}  // namespace folio
