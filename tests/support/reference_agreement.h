// A tiny family checkpoint's logits held to its reference (transformers' or
// llama.cpp's, in tests/data/tiny/<name>/reference.json, written by
// scripts/make_family_models.py): per position, the log-probabilities of the
// reference's top-8 and, where the reference's top-1 clearly leads, whether
// folio's top-1 is the same token.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_loader.h"
#include "support/greedy_runner.h"
#include "support/test_models.h"

namespace folio::testing {

// A position is decisive when the reference's top-1 beats its top-2 by more
// than this many logits x (1 + |top-1|).
inline constexpr double kDecisive = 1e-3;

inline std::string tiny_dir(const std::string& name) { return source_path("tests/data/tiny/" + name); }

inline nlohmann::json load_reference(const std::string& name) {
  std::ifstream in(tiny_dir(name) + "/reference.json");
  EXPECT_TRUE(in.good()) << "missing " << name << "; run scripts/make_family_models.py";
  return nlohmann::json::parse(in);
}

struct Agreement {
  int positions = 0, decisive = 0, decisive_agree = 0;
  double max_logprob_diff = 0;
};

// folio's logits of every sequence (each run with the context its
// references ran) against one reference leg's top-8 and log-sum-exp; a
// position is decisive when the reference's top-1 beats its top-2 by
// kDecisive and by min_margin logits.
inline Agreement compare_with_reference(Backend& backend, LoadedModel& model, const nlohmann::json& ref,
                                        const char* leg, double min_margin = 0.0) {
  Agreement a;
  for (const auto& seq : ref["sequences"]) {
    const std::vector<TokenId> ids = seq["token_ids"].get<std::vector<TokenId>>();
    GreedyRunner runner(backend, model, seq["n_ctx"].get<std::int64_t>(), 1);
    const std::vector<float> logits = runner.teacher_forced(ids);
    const std::int64_t V = runner.vocab_size();
    const auto& r = seq[leg];
    for (std::size_t pos = 0; pos < ids.size(); ++pos) {
      const float* row = logits.data() + pos * static_cast<std::size_t>(V);
      const double m = *std::max_element(row, row + V);
      double sum = 0;
      for (std::int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - m);
      const double lse = m + std::log(sum);
      const auto& top_ids = r["top_ids"][pos];
      const auto& top_logits = r["top_logits"][pos];
      const double ref_lse = r["logsumexp"][pos].get<double>();
      for (std::size_t k = 0; k < top_ids.size(); ++k) {
        const double got = row[top_ids[k].get<int>()] - lse, want = top_logits[k].get<double>() - ref_lse;
        a.max_logprob_diff = std::max(a.max_logprob_diff, std::abs(got - want));
      }
      ++a.positions;
      const double top = top_logits[0].get<double>(), second = top_logits[1].get<double>();
      if (top - second > std::max(kDecisive * (1.0 + std::abs(top)), min_margin)) {
        ++a.decisive;
        if (std::max_element(row, row + V) - row == top_ids[0].get<int>()) ++a.decisive_agree;
      }
    }
  }
  return a;
}

}  // namespace folio::testing
