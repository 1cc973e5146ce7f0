// EngineStats: what the engine has done and holds, as GET /metrics, the web
// page and `folio run` read it; and StepCounts, what the engine thread
// counted since it last published them, added to EngineStats under one lock
// per turn of its loop (not one per token).
#pragma once

#include <cstdint>
#include <vector>

#include "core/histogram.h"
#include "kv/kv_cache_manager.h"

namespace folio {

struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  KvUsage kv;
  PrefixCacheStats prefix_cache;
  std::int64_t num_preemptions = 0;
  std::int64_t prompt_tokens = 0;       // prompt tokens of finished and running requests
  std::int64_t computed_prompt_tokens = 0;  // prompt tokens actually run through the model
  std::int64_t generation_tokens = 0;
  std::int64_t num_requests_finished = 0;
  std::int64_t num_steps = 0;
  std::uint64_t kv_bytes = 0;
  // A hybrid model's state cache (kv/StateStorage): its bytes, taken from
  // the KV budget, and its slots (one per running sequence).
  std::uint64_t state_bytes = 0;
  std::int64_t state_slots = 0;
  // KV slots of used blocks summed over steps, and those holding no token:
  // their ratio is the paging waste averaged over the run.
  std::int64_t kv_slot_steps = 0;
  std::int64_t kv_empty_slot_steps = 0;
  // Speculative decoding: proposals made and accepted, and the decode steps
  // of sequences that speculated (each emits accepted + 1 tokens).
  std::int64_t spec_proposed_tokens = 0;
  std::int64_t spec_accepted_tokens = 0;
  std::int64_t spec_steps = 0;
  // Structured outputs: token masks computed on the host, and the time spent.
  std::int64_t constraint_masks = 0;
  double constraint_mask_seconds = 0.0;
  Histogram time_to_first_token{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram inter_token_latency{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
  Histogram e2e_latency{{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}};
  Histogram queue_time{{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
};

// The engine thread's counts since its last publication: the counters of
// EngineStats it adds to, and each histogram's observations (seconds) in the
// order they were made.
struct StepCounts {
  std::int64_t prompt_tokens = 0;
  std::int64_t computed_prompt_tokens = 0;
  std::int64_t generation_tokens = 0;
  std::int64_t num_requests_finished = 0;
  std::int64_t num_steps = 0;
  std::int64_t spec_proposed_tokens = 0;
  std::int64_t spec_accepted_tokens = 0;
  std::int64_t spec_steps = 0;
  std::int64_t constraint_masks = 0;
  double constraint_mask_seconds = 0.0;
  std::vector<double> time_to_first_token, inter_token_latency, e2e_latency, queue_time;

  // Adds everything to `stats`, then starts counting from zero again.
  void move_into(EngineStats& stats);
};

}  // namespace folio
