// Dummy models (vLLM's --load-format dummy): a preset's exact shape with
// random weights and no file, so that full-size models (Llama-3-8B,
// Qwen2.5-7B) can be loaded, timed and checked for memory where none can be
// downloaded. Weights take the types `folio quantize` would give them for a
// recipe (q4_k_m by default: the same per-tensor plan), as random blocks of
// every code with sane scales; the same seed gives the same bytes. Their
// outputs mean nothing; their speed and memory are those of the real model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model_loader.h"

namespace folio {

struct DummyModelOptions {
  std::string preset;              // e.g. "Qwen2.5-1.5B" (case, '-', '_' and spaces ignored)
  std::string weights = "q4_k_m";  // a `folio quantize` recipe: f32, f16, bf16, q8_0, q4_0 .. q6_k, q4_k_m, ...
  std::uint64_t seed = 0;
};

// The presets' full configs. Their parameter counts equal kv-calc's presets
// of the same names (a test checks).
struct DummyPreset {
  ModelConfig config;
  std::int64_t num_params = 0;  // every weight, norms and biases included
};
const std::vector<DummyPreset>& dummy_presets();
std::vector<std::string> dummy_preset_names();

// The model of a preset: config, random weights on the backend, forward pass.
// LoadedModel::path is "dummy:<preset>"; file and hf are null. Throws Error,
// listing the presets or recipes, for a name it does not know.
LoadedModel load_dummy_model(const DummyModelOptions& options, Backend& backend, const LoadProgress& progress = {});

}  // namespace folio
