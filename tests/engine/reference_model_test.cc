// The forward pass against two independent references, on real models
// (goldens from scripts/make_model_goldens.py):
// - Hugging Face transformers in fp32 on the same dequantized weights:
//   teacher-forced logits, compared with folio's f32-activation path.
// - llama.cpp: greedy 64-token continuations, compared with folio's default
//   q8-activation path (llama.cpp also quantizes activations to 8 bits).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "model/model_loader.h"
#include "support/greedy_runner.h"
#include "support/test_models.h"

namespace folio {
namespace {

using folio::testing::GreedyRunner;

struct ReferenceCase {
  const char* model_file;
  const char* golden;
};

nlohmann::json load_golden(const std::string& name) {
  std::ifstream in(folio::testing::source_path("tests/data/reference/" + name + ".json"));
  EXPECT_TRUE(in.good()) << "missing golden " << name << "; run scripts/make_model_goldens.py";
  return nlohmann::json::parse(in);
}

class ReferenceModelTest : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(ReferenceModelTest, LogitsMatchTransformersInF32) {
  FOLIO_REQUIRE_MODEL(path, GetParam().model_file);
  const nlohmann::json golden = load_golden(GetParam().golden);
  CpuBackend backend(0, {}, MatmulPrecision::kF32);
  LoadedModel model = load_model(path, backend);
  GreedyRunner runner(backend, model, 64, 1);
  const std::int64_t V = runner.vocab_size();

  double max_diff = 0, max_lse_diff = 0;
  int positions = 0, decisive = 0, top1_agree = 0;
  for (std::size_t p = 0; p < golden["token_ids"].size(); ++p) {
    std::vector<TokenId> ids = golden["token_ids"][p].get<std::vector<TokenId>>();
    std::vector<float> logits = runner.teacher_forced(ids);
    const auto& ref = golden["transformers"][p];
    for (std::size_t pos = 0; pos < ids.size(); ++pos) {
      const float* row = logits.data() + pos * V;
      const auto& top_ids = ref["top_ids"][pos];
      const auto& top_logits = ref["top_logits"][pos];
      for (std::size_t k = 0; k < top_ids.size(); ++k)
        max_diff = std::max(max_diff, std::abs(row[top_ids[k].get<int>()] - top_logits[k].get<double>()));
      double m = *std::max_element(row, row + V), sum = 0;
      for (std::int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - m);
      max_lse_diff = std::max(max_lse_diff, std::abs(m + std::log(sum) - ref["logsumexp"][pos].get<double>()));
      ++positions;
      // Top-1 must agree wherever the reference is decisive.
      if (top_logits[0].get<double>() - top_logits[1].get<double>() > 1e-3) {
        ++decisive;
        auto ours = std::max_element(row, row + V) - row;
        if (ours == top_ids[0].get<int>()) ++top1_agree;
      }
    }
  }
  std::printf("[%s] %d positions: max |logit diff| %.2e, max |logsumexp diff| %.2e, top-1 %d/%d decisive\n",
              GetParam().golden, positions, max_diff, max_lse_diff, top1_agree, decisive);
  RecordProperty("max_logit_diff", std::to_string(max_diff));
  EXPECT_LE(max_diff, 1e-2);
  EXPECT_LE(max_lse_diff, 1e-2);
  EXPECT_EQ(top1_agree, decisive);
}

TEST_P(ReferenceModelTest, GreedyContinuationsMatchLlamaCpp) {
  FOLIO_REQUIRE_MODEL(path, GetParam().model_file);
  const nlohmann::json golden = load_golden(GetParam().golden);
  CpuBackend backend(0, {}, MatmulPrecision::kQ8);
  LoadedModel model = load_model(path, backend);
  const auto& cases = golden["llama_cpp"];
  std::vector<std::vector<TokenId>> prompts;
  for (const auto& ids : golden["token_ids"]) prompts.push_back(ids.get<std::vector<TokenId>>());
  GreedyRunner runner(backend, model, 128, static_cast<std::int64_t>(prompts.size()));
  // Run every prompt the full 64 tokens; the comparison stops where the
  // reference stopped (at its end-of-generation token).
  auto outputs = runner.greedy(prompts, 64, {});

  int equal = 0;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    std::vector<TokenId> want = cases[p]["tokens"].get<std::vector<TokenId>>();
    std::vector<TokenId> got(outputs[p].begin(), outputs[p].begin() + std::min(outputs[p].size(), want.size()));
    if (got == want) {
      ++equal;
      continue;
    }
    std::size_t at = 0;
    while (at < got.size() && got[at] == want[at]) ++at;
    std::printf("[%s] prompt %zu diverges at token %zu of %zu: llama.cpp %d, folio %d; llama.cpp's margin there %.3f\n",
                GetParam().golden, p, at, want.size(), want[at], at < got.size() ? got[at] : -1,
                cases[p]["margins"][at].get<double>());
  }
  std::printf("[%s] greedy continuations equal to llama.cpp: %d/%zu\n", GetParam().golden, equal, prompts.size());
  EXPECT_GE(equal * 10, static_cast<int>(prompts.size()) * 9);
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceModelTest,
                         ::testing::Values(ReferenceCase{folio::testing::kSmolLM2, "smollm2-135m-instruct-q4_1"},
                                           ReferenceCase{folio::testing::kQwen05B, "qwen2.5-coder-0.5b-instruct"}),
                         [](const auto& param_info) { return std::string(param_info.param.golden[0] == 's' ? "SmolLM2" : "Qwen05B"); });

}  // namespace
}  // namespace folio
