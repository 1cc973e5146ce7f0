// The subcommands of the `folio` binary; each file in cli/ adds its own.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace folio::cli {

void register_commands(CLI::App& app);

void add_inspect(CLI::App& app);
void add_run(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_kv_calc(CLI::App& app);
void add_serve(CLI::App& app);
void add_bench(CLI::App& app);
void add_quantize(CLI::App& app);

// The default model's path in the models cache (FOLIO_MODELS overrides).
std::string default_model_path();

// The first of `candidates` (relative paths) that exists under the folio
// binary's directory, the directory above it (the source tree of
// build/folio) or the current one; empty when none does.
std::string find_near_binary(const std::vector<std::string>& candidates);

}  // namespace folio::cli
