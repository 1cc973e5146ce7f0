// load_model: a model file -> its config, weights and forward pass, with the
// architecture chosen by the registry.
#pragma once

#include <memory>
#include <string>

#include "model/gguf_file.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace folio {

struct LoadedModel {
  std::shared_ptr<const GgufFile> file;
  ModelConfig config;
  std::shared_ptr<const Weights> weights;  // the model points into these
  std::unique_ptr<Model> model;
};

LoadedModel load_model(const std::string& path, Backend& backend);

}  // namespace folio
