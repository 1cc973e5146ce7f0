// The planner of the web page ("How big is the cache?") as JSON: the menus
// (model presets and the loaded model, devices and this machine, formats),
// and a plan for one choice of them, computed by kv/capacity_planner and
// worded by kv/capacity_report - the same arithmetic and words as
// `folio kv-calc`; the page does no sums of its own.
#pragma once

#include <cstdint>
#include <optional>

#include "kv/capacity_planner.h"
#include "server/api/json_fields.h"

namespace folio::server {

// What the planner may choose from beyond the presets.
struct PlannerChoices {
  // The served model's shape and the bytes its weights take as stored;
  // nullopt while it loads.
  std::optional<ModelShape> loaded_model;
  std::int64_t loaded_weight_bytes = 0;
  // This machine: its memory and measured bandwidth; nullopt when not offered.
  std::optional<DeviceSpec> this_machine;
};

// The ids the body of a plan names: a preset's name, "loaded", "this-machine", "custom".
inline constexpr const char* kLoadedModelId = "loaded";
inline constexpr const char* kThisMachineId = "this-machine";
inline constexpr const char* kCustomDeviceId = "custom";

// GET /api/capacity: every model, device, weight and KV format, and the defaults.
Json capacity_menus(const PlannerChoices& choices);

// POST /api/capacity: the plan for {"model", "device", "memory_bytes" and
// "bandwidth_bytes_per_s" (custom), "weights" ("stored" for the loaded
// model's file), "kv" ("f16", "q8_0:f16"), "context_tokens", "num_users",
// "num_kv_heads" (any divisor of the query heads), "block_size",
// "reserve_fraction"}; every field but model and device has a default.
// ApiError 400 names the field that is wrong and says what it may be.
Json capacity_answer(const Json& body, const PlannerChoices& choices);

// Limits on a query, so that no product of them overflows 64 bits.
inline constexpr std::int64_t kMaxPlannerUsers = 65'536;
inline constexpr std::int64_t kMaxPlannerContext = 4 << 20;

}  // namespace folio::server
