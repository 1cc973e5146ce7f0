// vLLM's wire form of KV-cache events (vllm/distributed/kv_events.py, its
// msgspec structs in array form): a batch is [ts, [event, ...], dp_rank] and
// each event an array tagged by its class name, fields in declared order:
//   ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name]
//   ["BlockRemoved", block_hashes, medium]
//   ["AllBlocksCleared"]
// Fields with defaults that folio never sets (extra_keys, group_idx) are left
// off the end, as msgspec's omit_defaults does.
#pragma once

#include <span>
#include <string>

#include "kv/kv_event.h"

namespace folio::server {

// The tier vLLM names its own KV pool; folio's pool is the engine's only tier
// whatever the backend's device, so routers read it as the primary one.
inline constexpr const char* kKvEventMedium = "GPU";

std::string encode_kv_event_batch(double ts_s, std::span<const KvEvent> events, int data_parallel_rank);

}  // namespace folio::server
