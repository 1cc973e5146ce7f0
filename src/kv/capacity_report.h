// capacity_report: a CapacityPlan as a person reads it, each figure with its
// units and the arithmetic that gave it, so that `folio kv-calc` and the web
// page print the same words from the same numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/capacity_planner.h"

namespace folio {

struct CapacityRow {
  std::string key;    // for programs: "kv_per_token"
  std::string name;   // "KV per token"
  std::string value;  // "819,200 B = 800 KiB"
  std::string how;    // "2 (K, V) x 40 layers x 40 KV heads x 128 dims x 2 B (f16)"
};

struct CapacityReport {
  std::vector<CapacityRow> rows;
  std::vector<std::string>
      notes;  // caveats: past the trained context, a mixture of experts; '\n' where a terminal breaks the line
};

// `weights`: the format the weights were sized in (weight_bytes()), or
// nullopt when query.weight_bytes is a model file's own. Without a device
// only the model's rows are made (weights, KV per token, per user, in all).
CapacityReport capacity_report(const CapacityQuery& query, const CapacityPlan& plan,
                               const std::optional<NumberFormat>& weights, bool have_device);

// The units the rows use, for lines around them.
std::string grouped(std::int64_t n);           // 68719476736 -> "68,719,476,736"
std::string binary_bytes(std::int64_t bytes);  // "64 GiB", "1,600 MiB", "12.55 GiB"
std::string decimal_gb(std::int64_t bytes);    // "68.72 GB"
std::string params_text(std::int64_t n);       // "6.74 B", "134.52 M"
std::string rate_text(double bytes_per_s);     // "3.35 TB/s", "900 GB/s"

}  // namespace folio
