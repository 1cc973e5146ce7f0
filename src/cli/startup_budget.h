// The start-up budget line of serve and run: where the device's memory went
// (weights, the KV cache, activations and staging, what is left) and how many
// users of what context the KV cache holds - the capacity planner, live.
#pragma once

#include <string>

#include "engine/engine.h"

namespace folio::cli {

// One line, e.g. "cuda NVIDIA H200 (139.8 GiB): weights 1.04 GiB, KV cache
// 2.00 GiB (131,072 tokens: 4 users of 32,768 tokens, or 128 of 1,024),
// activations and staging 312 MiB, 135.2 GiB free".
std::string startup_budget(const ModelSession& session, const Engine& engine);

}  // namespace folio::cli
