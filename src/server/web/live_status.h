// live_json: the engine at one moment as the page's live view draws it once a
// second - requests running and waiting, token counters (the page turns their
// change over time_s into tokens per second), the prefix cache, speculation,
// preemptions, and the KV pool block by block.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "server/api/json_fields.h"

namespace folio::server {

// Cells the block map is cut to: a pool of more blocks shows several per cell.
inline constexpr std::size_t kMaxBlockMapCells = 16'384;

// `stats.kv` should be the pool's counts when `block_map` was copied
// (Engine::kv_block_map's `usage`), so that the two agree.
Json live_json(const EngineStats& stats, std::string_view block_map, double time_s);

// `map` (kv/block_map.h) in at most max_cells characters: each cell stands for
// blocks_per_cell consecutive blocks (the last maybe fewer) and shows the state
// most of them are in (ties to the busier one: in use, shared, cached, free).
std::string group_block_map(std::string_view map, std::size_t max_cells, std::size_t* blocks_per_cell);

}  // namespace folio::server
