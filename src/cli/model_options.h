// The flags every model-running subcommand shares (-m, threads, backend,
// precision), mapped onto ModelSessionOptions.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "engine/model_session.h"

namespace folio::cli {

struct ModelOptions {
  ModelSessionOptions session;
  std::string model;        // empty: the default model
  std::vector<std::string> models;  // `folio serve`: every -m, in order (the first is also `model`)
  std::string activations;  // empty: the backend's default

  // The session options with the model path resolved.
  ModelSessionOptions resolved() const;
};

// `several`: -m may be repeated (into options.models), for folio serve.
void add_model_options(CLI::App* cmd, ModelOptions& options, bool several = false);

// Opens the model with a progress line for long loads.
std::shared_ptr<ModelSession> open_model(const ModelOptions& options);
// The same for options already resolved (a hub name pulled once, not twice).
std::shared_ptr<ModelSession> open_model(ModelSessionOptions resolved);

}  // namespace folio::cli
