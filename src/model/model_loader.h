// load_model: a model - a GGUF file or a Hugging Face directory - -> its
// config, weights and forward pass, with the architecture chosen by the
// registry. What it returns is the same whatever the format.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace folio {

struct LoadedModel {
  std::string path;
  std::shared_ptr<const GgufFile> file;    // the GGUF file; null for a Hugging Face directory
  std::shared_ptr<const HfCheckpoint> hf;  // the Hugging Face directory; null for a GGUF file
  ModelConfig config;
  std::shared_ptr<const Weights> weights;  // the model points into these
  std::unique_ptr<Model> model;

  // The bytes of every mapped file (the GGUF file or the shards).
  std::vector<std::span<const std::uint8_t>> mapped_bytes() const;
};

// `path` is a GGUF file or a directory holding config.json and safetensors.
// The weights go to the backend's device (progress: bytes done of all).
LoadedModel load_model(const std::string& path, Backend& backend, const LoadProgress& progress = {});

}  // namespace folio
