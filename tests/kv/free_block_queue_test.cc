// FreeBlockQueue: order at both ends, O(1) removal from the middle, and a
// random run against std::list.
#include "kv/free_block_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <random>

#include "core/error.h"

namespace folio {
namespace {

using Blocks = std::vector<BlockId>;

TEST(FreeBlockQueue, StartsWithEveryBlockInOrder) {
  FreeBlockQueue q(5);
  EXPECT_EQ(q.size(), 5);
  EXPECT_EQ(q.to_vector(), (Blocks{0, 1, 2, 3, 4}));
  EXPECT_EQ(q.front(), 0);
  EXPECT_TRUE(FreeBlockQueue(0).empty());
}

TEST(FreeBlockQueue, RemovesFromTheMiddleAndPushesAtBothEnds) {
  FreeBlockQueue q(5);
  q.remove(2);
  EXPECT_FALSE(q.contains(2));
  EXPECT_EQ(q.to_vector(), (Blocks{0, 1, 3, 4}));
  q.push_back(2);
  EXPECT_EQ(q.to_vector(), (Blocks{0, 1, 3, 4, 2}));
  EXPECT_EQ(q.pop_front(), 0);
  q.remove(4);
  q.push_front(4);
  EXPECT_EQ(q.to_vector(), (Blocks{4, 1, 3, 2}));
  while (!q.empty()) q.pop_front();
  EXPECT_EQ(q.size(), 0);
  q.push_front(3);
  EXPECT_EQ(q.to_vector(), (Blocks{3}));
}

TEST(FreeBlockQueue, MisuseIsCaught) {
  FreeBlockQueue q(3);
  EXPECT_THROW(q.push_back(1), Error);  // already queued
  q.remove(1);
  EXPECT_THROW(q.remove(1), Error);     // not queued
  EXPECT_THROW(q.push_back(3), Error);  // out of range
  FreeBlockQueue empty(0);
  EXPECT_THROW(empty.pop_front(), Error);
}

// Random operations against std::list as the reference.
TEST(FreeBlockQueue, MatchesAListUnderRandomOperations) {
  constexpr int kBlocks = 32;
  FreeBlockQueue q(kBlocks);
  std::list<BlockId> ref;
  for (BlockId b = 0; b < kBlocks; ++b) ref.push_back(b);
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    const BlockId b = static_cast<BlockId>(rng() % kBlocks);
    const bool queued = std::find(ref.begin(), ref.end(), b) != ref.end();
    ASSERT_EQ(q.contains(b), queued);
    switch (rng() % 3) {
      case 0:
        if (queued) {
          q.remove(b);
          ref.remove(b);
        } else {
          q.push_back(b);
          ref.push_back(b);
        }
        break;
      case 1:
        if (!queued) {
          q.push_front(b);
          ref.push_front(b);
        }
        break;
      default:
        if (!ref.empty()) {
          ASSERT_EQ(q.pop_front(), ref.front());
          ref.pop_front();
        }
    }
    ASSERT_EQ(q.size(), static_cast<int>(ref.size()));
  }
  EXPECT_EQ(q.to_vector(), Blocks(ref.begin(), ref.end()));
}

}  // namespace
}  // namespace folio
