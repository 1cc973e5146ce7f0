// The engine flags that serve and bench share: batch limits, context length,
// the KV cache's budget and type, prefix caching and speculative decoding.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/speculative_options.h"
#include "engine/engine.h"

namespace folio::cli {

struct EngineOptions {
  EngineConfig config;  // the fields the flags set directly; the rest as the caller sets them
  std::string kv_cache_memory = "2GiB";
  std::string kv_dtype = "f16";
  bool no_prefix_caching = false;
  std::string scheduling_policy = "fcfs";
  SpeculativeOptions speculative;

  // The config with the text flags parsed; throws Error for a size, type or
  // method it does not understand.
  EngineConfig resolved() const;
};

void add_engine_options(CLI::App* cmd, EngineOptions& options);

}  // namespace folio::cli
