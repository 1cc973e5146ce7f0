#include "cli/engine_options.h"

#include "core/error.h"
#include "kv/capacity_planner.h"
#include "tensor/kv_dtype.h"

namespace folio::cli {

EngineConfig EngineOptions::resolved() const {
  EngineConfig c = config;
  const auto kv_bytes = parse_byte_size(kv_cache_memory);
  if (!kv_bytes || *kv_bytes <= 0)
    fail("--kv-cache-memory \"{}\" is not a size; write it with a unit: 2GiB, 512MiB", kv_cache_memory);
  c.kv_cache_bytes = static_cast<std::uint64_t>(*kv_bytes);
  c.kv_dtype = kv_cache_dtype_from_flag(kv_dtype);
  c.enable_prefix_caching = !no_prefix_caching;
  c.policy = scheduling_policy == "priority" ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
  c.speculative = speculative.resolved();
  return c;
}

void add_engine_options(CLI::App* cmd, EngineOptions& o) {
  EngineConfig& e = o.config;
  cmd->add_option("--max-num-seqs", e.max_num_seqs, "Most sequences in one forward pass")->check(CLI::PositiveNumber);
  cmd->add_option("--max-num-batched-tokens", e.max_num_batched_tokens, "Most tokens in one forward pass")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-model-len", e.max_model_len, "Context length (default: the model's, capped by the KV cache)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-memory", o.kv_cache_memory, "KV cache budget, with a unit (default 2GiB)");
  cmd->add_option("--kv-cache-dtype", o.kv_dtype, kKvCacheDTypeHelp);
  cmd->add_flag("--no-prefix-caching", o.no_prefix_caching, "Turn prefix caching off");
  cmd->add_option("--scheduling-policy", o.scheduling_policy,
                  "fcfs (default: first come, first served) or priority (a request's `priority`, lower first)")
      ->check(CLI::IsMember({"fcfs", "priority"}));
  add_speculative_options(cmd, o.speculative);
}

}  // namespace folio::cli
