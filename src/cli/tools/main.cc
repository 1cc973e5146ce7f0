// The `folio-tools` binary: the offline tools (quantize, perplexity), apart
// from `folio` so that the serving binary links none of what they need.
// `folio quantize ...` and `folio perplexity ...` run it.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"folio-tools: folio's offline tools (folio quantize and folio perplexity run them)"};
  folio::cli::add_quantize(app);
  folio::cli::add_perplexity(app);
  return folio::cli::run_app(app, argc, argv);
}
