// The `folio` binary: one subcommand per job (serve, run, bench, inspect, ...).
// The offline tools (quantize, perplexity) live in `folio-tools` beside it,
// which links what serving does not need (OpenBLAS); folio runs it for them.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "cli/chat.h"
#include "cli/commands.h"

namespace {

constexpr const char* kToolCommands[][2] = {
    {"quantize", "Rewrite a GGUF model's weights in another type (runs folio-tools quantize)"},
    {"perplexity", "Perplexity and KL divergence over a text (runs folio-tools perplexity)"},
};

// Replaces this process with folio-tools for `argv` (argv[1] is the command).
int run_tool(int argc, char** argv) {
  const std::string tools = folio::cli::find_near_binary({"folio-tools", "build/folio-tools"});
  if (tools.empty()) {
    std::fprintf(stderr,
                 "folio: error: `folio %s` runs the folio-tools binary, which is not beside this one; build it "
                 "(cmake --build build --target folio-tools)\n",
                 argv[1]);
    return 1;
  }
  std::vector<char*> args(argv, argv + argc);
  args[0] = const_cast<char*>(tools.c_str());
  args.push_back(nullptr);
  execv(tools.c_str(), args.data());
  std::fprintf(stderr, "folio: error: could not run %s: %s\n", tools.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1)
    for (const auto& [name, help] : kToolCommands)
      if (std::string_view(argv[1]) == name) return run_tool(argc, argv);
  CLI::App app{"folio: an LLM inference and serving engine"};
  folio::cli::add_inspect(app);
  folio::cli::add_tokenize(app);
  folio::cli::add_run(app);
  folio::cli::add_kv_calc(app);
  folio::cli::add_serve(app);
  folio::cli::add_bench(app);
  folio::cli::add_pull(app);
  folio::cli::add_chat(app);
  for (const auto& [name, help] : kToolCommands) app.add_subcommand(name, help)->allow_extras();
  return folio::cli::run_app(app, argc, argv);
}
