// Reads llama.cpp's greedy continuations from a golden (as the scripts in
// scripts/ write them: "token_ids" per prompt, and per prompt "tokens" and
// "margins" in `continuations`).
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "support/greedy_runner.h"

namespace folio::testing {

inline std::vector<LlamaCppContinuation> llama_cpp_continuations(const nlohmann::json& token_ids,
                                                                const nlohmann::json& continuations) {
  std::vector<LlamaCppContinuation> cases;
  for (std::size_t p = 0; p < continuations.size(); ++p)
    cases.push_back({token_ids[p].get<std::vector<TokenId>>(), continuations[p]["tokens"].get<std::vector<TokenId>>(),
                     continuations[p]["margins"].get<std::vector<double>>()});
  return cases;
}

}  // namespace folio::testing
