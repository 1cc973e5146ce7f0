// The subcommands of the `folio` binary (each file in cli/ adds its own) and
// of `folio-tools`, the offline tools (cli/tools/: quantize, perplexity),
// which `folio` runs for those names so that it need not link them.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "hub/pull.h"

namespace folio::cli {

void add_inspect(CLI::App& app);
void add_run(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_kv_calc(CLI::App& app);
void add_serve(CLI::App& app);
void add_bench(CLI::App& app);
void add_pull(CLI::App& app);
// folio-tools'.
void add_perplexity(CLI::App& app);
void add_quantize(CLI::App& app);

// Parses the command line into `app` and runs the subcommand it names; an
// error is one line on stderr. Returns the exit status.
int run_app(CLI::App& app, int argc, char** argv);

// The default model's path in the models cache (FOLIO_MODELS overrides):
// Qwen2.5-Coder-1.5B-Instruct, the smallest packaged model whose answers make sense.
std::string default_model_path();

// What -m names, made a local path: empty -> the default model; an
// existing file or folder -> itself; a model name on the Hugging Face Hub
// (ORG/REPO[:QUANT], hf://..., an alias) -> pulled into the hub's cache
// (progress on stderr) and the file or folder to load; anything else as it is
// (the loader then says it is not there).
std::string resolve_model(const std::string& text);
// Pulls `ref` as resolve_model does (the hub's cache, progress on stderr).
hub::PullResult pull_with_progress(const hub::ModelRef& ref);
// The name a server gives a model: the hub name as written (without hf://),
// or the stem of a local file.
std::string served_name_of(const std::string& text, const std::string& path);

// The first of `candidates` (relative paths) that exists under the folio
// binary's directory, the directory above it (the source tree of
// build/folio) or the current one; empty when none does.
std::string find_near_binary(const std::vector<std::string>& candidates);

}  // namespace folio::cli
