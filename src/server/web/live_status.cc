#include "server/web/live_status.h"

#include <algorithm>
#include <array>

#include "kv/block_map.h"

namespace folio::server {
namespace {

double ratio(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

double mean(const Histogram& h) { return h.count() > 0 ? h.sum() / static_cast<double>(h.count()) : 0.0; }

}  // namespace

std::string group_block_map(std::string_view map, std::size_t max_cells, std::size_t* blocks_per_cell) {
  const std::size_t per_cell = map.empty() || max_cells == 0 ? 1 : (map.size() + max_cells - 1) / max_cells;
  if (blocks_per_cell) *blocks_per_cell = per_cell;
  if (per_cell == 1) return std::string(map);
  static constexpr std::array<char, 4> kBusiestFirst = {kBlockInUse, kBlockShared, kBlockCached, kBlockFree};
  std::string out;
  out.reserve((map.size() + per_cell - 1) / per_cell);
  for (std::size_t begin = 0; begin < map.size(); begin += per_cell) {
    const std::string_view cell = map.substr(begin, per_cell);
    char best = kBlockFree;
    std::size_t best_count = 0;
    for (char state : kBusiestFirst) {
      const auto n = static_cast<std::size_t>(std::count(cell.begin(), cell.end(), state));
      if (n > best_count) {
        best = state;
        best_count = n;
      }
    }
    out.push_back(best);
  }
  return out;
}

Json live_json(const EngineStats& s, std::string_view block_map, double time_s) {
  std::size_t per_cell = 1;
  std::string cells = group_block_map(block_map, kMaxBlockMapCells, &per_cell);
  const PrefixCacheStats& pc = s.prefix_cache;
  return {{"time_s", time_s},
          {"num_running", s.num_running},
          {"num_waiting", s.num_waiting},
          {"num_requests_finished", s.num_requests_finished},
          {"num_steps", s.num_steps},
          {"num_preemptions", s.num_preemptions},
          {"tokens",
           {{"prompt", s.prompt_tokens},
            {"computed_prompt", s.computed_prompt_tokens},
            {"generation", s.generation_tokens}}},
          {"kv",
           {{"num_blocks", s.kv.num_blocks},
            {"block_size", s.kv.block_size},
            {"num_used_blocks", s.kv.num_used_blocks},
            {"num_free_blocks", s.kv.num_free_blocks},
            {"num_cached_blocks", s.kv.num_cached_blocks},
            {"num_cached_free_blocks", s.kv.num_cached_free_blocks},
            {"empty_slot_fraction", s.kv.empty_slot_fraction()},
            {"bytes", s.kv_bytes},
            {"blocks_per_cell", per_cell},
            {"map", std::move(cells)}}},
          {"prefix_cache",
           {{"num_queries", pc.num_queries},
            {"num_hits", pc.num_hits},
            {"num_queried_tokens", pc.num_queried_tokens},
            {"num_hit_tokens", pc.num_hit_tokens},
            {"token_hit_rate", pc.token_hit_rate()}}},
          {"speculation",
           {{"num_proposed_tokens", s.spec_proposed_tokens},
            {"num_accepted_tokens", s.spec_accepted_tokens},
            {"acceptance_rate", ratio(s.spec_accepted_tokens, s.spec_proposed_tokens)}}},
          {"latency_mean_s",
           {{"time_to_first_token", mean(s.time_to_first_token)},
            {"inter_token", mean(s.inter_token_latency)},
            {"queue", mean(s.queue_time)}}}};
}

}  // namespace folio::server
