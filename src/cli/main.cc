// The `folio` binary: one subcommand per job (inspect, tokenize, run, ...).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"
#include "core/version.h"

int main(int argc, char** argv) {
  CLI::App app{"folio: an LLM inference and serving engine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("folio ") + folio::version_string() + " (" +
                                        folio::git_commit() + ")");
  folio::cli::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const folio::Error& e) {
    std::fprintf(stderr, "folio: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "folio: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
