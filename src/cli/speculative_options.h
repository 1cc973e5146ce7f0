// The speculative-decoding flags shared by serve, run and bench:
// --speculative ngram|draft:PATH, --num-speculative-tokens K and
// --speculative-policy adaptive|fixed.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/speculative/speculative_config.h"

namespace folio::cli {

struct SpeculativeOptions {
  std::string method;  // empty: off
  int num_tokens = 4;
  int ngram_min = 2;
  int ngram_max = 4;
  std::string policy = "adaptive";

  // Throws Error for a method that is neither ngram nor draft:PATH.
  SpeculativeConfig resolved() const;
};

void add_speculative_options(CLI::App* cmd, SpeculativeOptions& options);

}  // namespace folio::cli
