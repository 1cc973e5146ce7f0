// The live view's JSON: a pool larger than the grid is cut into cells that
// show what most of their blocks are (ties to the busier state), and the
// counters arrive under the names the page reads.
#include "server/web/live_status.h"

#include <gtest/gtest.h>

#include <string>

#include "kv/block_map.h"

namespace folio::server {
namespace {

TEST(LiveStatus, SmallPoolsAreDrawnBlockByBlock) {
  std::size_t per_cell = 0;
  EXPECT_EQ(group_block_map("fucs", 16, &per_cell), "fucs");
  EXPECT_EQ(per_cell, 1u);
  EXPECT_EQ(group_block_map("", 16, &per_cell), "");
}

TEST(LiveStatus, LargePoolsAreGroupedByTheStateMostBlocksAreIn) {
  std::size_t per_cell = 0;
  // 10 blocks in at most 4 cells: 3 a cell, the last holds one.
  EXPECT_EQ(group_block_map("ffuccfussc", 4, &per_cell), "fcsc");  // ffu ccf uss c
  EXPECT_EQ(per_cell, 3u);
  // Ties go to the busier state: in use, shared, cached, free.
  EXPECT_EQ(group_block_map("fucfscus", 4, &per_cell), "ucsu");  // fu cf sc us
  EXPECT_EQ(per_cell, 2u);
  const std::string big(100'000, kBlockFree);
  EXPECT_LE(group_block_map(big, kMaxBlockMapCells, &per_cell).size(), kMaxBlockMapCells);
  EXPECT_EQ(per_cell, 7u);
}

TEST(LiveStatus, CountersUnderThePagesNames) {
  EngineStats s;
  s.num_running = 2;
  s.num_waiting = 1;
  s.generation_tokens = 40;
  s.spec_proposed_tokens = 10;
  s.spec_accepted_tokens = 7;
  s.kv.num_blocks = 4;
  s.kv.num_used_blocks = 2;
  s.kv.num_cached_free_blocks = 1;
  const Json j = live_json(s, "uucf", 12.5);
  EXPECT_EQ(j["time_s"], 12.5);
  EXPECT_EQ(j["num_running"], 2);
  EXPECT_EQ(j["num_waiting"], 1);
  EXPECT_EQ(j["tokens"]["generation"], 40);
  EXPECT_EQ(j["kv"]["num_used_blocks"], 2);
  EXPECT_EQ(j["kv"]["num_cached_free_blocks"], 1);
  EXPECT_EQ(j["kv"]["map"], "uucf");
  EXPECT_EQ(j["kv"]["blocks_per_cell"], 1);
  EXPECT_DOUBLE_EQ(j["speculation"]["acceptance_rate"].get<double>(), 0.7);
  EXPECT_EQ(j["prefix_cache"]["token_hit_rate"], 0.0);  // nothing asked yet: 0, not NaN
}

}  // namespace
}  // namespace folio::server
