// BlockTable: slot = block_id * block_size + offset, and block counts.
#include "kv/block_table.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace folio {
namespace {

TEST(BlockTable, SlotIsBlockTimesBlockSizePlusOffset) {
  BlockTable t(16);
  t.append(7);
  t.append(std::vector<BlockId>{2, 9});
  EXPECT_EQ(t.num_blocks(), 3);
  EXPECT_EQ(t.num_slots(), 48);
  EXPECT_EQ(t.slot(0), 7 * 16);
  EXPECT_EQ(t.slot(15), 7 * 16 + 15);
  EXPECT_EQ(t.slot(16), 2 * 16);
  EXPECT_EQ(t.slot(47), 9 * 16 + 15);
  EXPECT_THROW(t.slot(48), Error);
  EXPECT_THROW(t.slot(-1), Error);
  std::vector<SlotId> m = {-5};
  t.slot_mapping(14, 18, m);  // appends
  EXPECT_EQ(m, (std::vector<SlotId>{-5, 126, 127, 32, 33}));
  EXPECT_EQ(t.pop_back(), 9);
  EXPECT_EQ(t.num_slots(), 32);
}

TEST(BlockTable, BlocksForRoundsUp) {
  EXPECT_EQ(BlockTable::blocks_for(0, 16), 0);
  EXPECT_EQ(BlockTable::blocks_for(1, 16), 1);
  EXPECT_EQ(BlockTable::blocks_for(16, 16), 1);
  EXPECT_EQ(BlockTable::blocks_for(17, 16), 2);
  EXPECT_EQ(BlockTable::blocks_for(4096, 16), 256);
}

}  // namespace
}  // namespace folio
