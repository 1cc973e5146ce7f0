// The backend the tests run on (FOLIO_TEST_BACKEND: cuda on a GPU machine)
// against the CPU backend in f32, model by model: teacher-forced logits of
// the tiny Hugging Face models (tests/data/tiny: real architectures, random
// weights) and of dummy presets (SmolLM2-135M here; FOLIO_AGREEMENT_DUMMY
// names full-size ones on the GPU machine, e.g. "Qwen2.5-1.5B:q4_k_m"),
// compared as ||got - cpu|| / ||cpu|| over all logits, the top-1 token
// agreeing at every position where the CPU's top-1/top-2 margin is clear, and
// a chunked prefill giving the same bits as a whole one (rule 5). Each model
// prints one "[agreement]" line, which scripts/gpu_check.sh collects.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "model/dummy_model.h"
#include "support/greedy_runner.h"
#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

using folio::testing::GreedyRunner;

struct Bounds {
  double relative;  // ||got - cpu|| / ||cpu||
  double decisive;  // a position is decisive when top-1 - top-2 > decisive x (1 + |top-1|)
};

// f32 activations differ from the CPU's f32 path by float reassociation only;
// bf16 ones round every op's output to 8 bits.
Bounds bounds_for(DType activations) {
  if (activations == DType::F32) return {1e-4, 1e-3};
  return {5e-2, 5e-2};
}

struct Agreement {
  double relative = 0;
  int positions = 0, decisive = 0, decisive_agree = 0;
};

Agreement compare_logits(const std::vector<float>& got, const std::vector<float>& want, std::int64_t vocab,
                         const Bounds& b) {
  Agreement a;
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff2 += d * d;
    ref2 += static_cast<double>(want[i]) * want[i];
  }
  a.relative = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  for (std::size_t row = 0; row * vocab < want.size(); ++row) {
    const float* w = want.data() + row * vocab;
    const float* g = got.data() + row * vocab;
    std::int64_t top = 0, second = -1, got_top = 0;
    for (std::int64_t i = 1; i < vocab; ++i) {
      if (w[i] > w[top]) {
        second = top;
        top = i;
      } else if (second < 0 || w[i] > w[second]) {
        second = i;
      }
      if (g[i] > g[got_top]) got_top = i;
    }
    ++a.positions;
    if (second >= 0 && w[top] - w[second] > b.decisive * (1.0 + std::fabs(w[top]))) {
      ++a.decisive;
      if (got_top == top) ++a.decisive_agree;
    }
  }
  return a;
}

// Teacher-forced logits of every sequence on one backend, whole and (where
// the backend is batch invariant) in chunks of 7, which must be the same bits.
std::vector<float> logits_of(Backend& backend, LoadedModel& model, const std::vector<std::vector<TokenId>>& seqs,
                             bool check_chunks) {
  std::int64_t longest = 1;
  for (const auto& s : seqs) longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(s.size()));
  GreedyRunner runner(backend, model, longest, 1);
  std::vector<float> all;
  for (const auto& ids : seqs) {
    const std::vector<float> whole = runner.teacher_forced(ids);
    if (check_chunks) {
      EXPECT_EQ(runner.teacher_forced(ids, 7), whole) << "a chunked prefill changed the logits";
    }
    all.insert(all.end(), whole.begin(), whole.end());
  }
  return all;
}

void expect_agreement(const std::string& label, const std::function<LoadedModel(Backend&)>& load,
                      const std::vector<std::vector<TokenId>>& seqs) {
  BackendOptions cpu_options;
  cpu_options.precision = "f32";
  auto cpu = make_backend(cpu_options);
  auto test = folio::testing::make_test_backend(0, "f32");
  LoadedModel cpu_model = load(*cpu);
  LoadedModel test_model = load(*test);
  const std::vector<float> want = logits_of(*cpu, cpu_model, seqs, false);
  const std::vector<float> got = logits_of(*test, test_model, seqs, true);
  ASSERT_EQ(got.size(), want.size());
  const Bounds b = bounds_for(test->activation_dtype());
  const Agreement a = compare_logits(got, want, cpu_model.config.vocab_size, b);
  std::printf("[agreement] %s on %s (%s): %d positions, relative error %.3g, top-1 agrees at %d of %d decisive\n",
              label.c_str(), test->name().c_str(), std::string(name(test->activation_dtype())).c_str(), a.positions,
              a.relative, a.decisive_agree, a.decisive);
  EXPECT_LE(a.relative, b.relative) << label;
  EXPECT_EQ(a.decisive_agree, a.decisive) << label;
  EXPECT_GT(a.decisive, 0) << label << ": no position was decisive";
}

class TinyAgreement : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyAgreement, LogitsAgreeWithTheCpuBackend) {
  const std::string dir = folio::testing::source_path(std::string("tests/data/tiny/") + GetParam());
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in.good()) << "missing " << dir;
  const nlohmann::json ref = nlohmann::json::parse(in);
  std::vector<std::vector<TokenId>> seqs;
  // make_tiny_models.py's references list token_ids; make_family_models.py's, sequences.
  if (ref.contains("token_ids")) {
    for (const auto& s : ref["token_ids"]) seqs.push_back(s.get<std::vector<TokenId>>());
  } else {
    for (const auto& s : ref["sequences"]) seqs.push_back(s["token_ids"].get<std::vector<TokenId>>());
  }
  expect_agreement(
      GetParam(), [&](Backend& be) { return load_model(dir, be); }, seqs);
}

INSTANTIATE_TEST_SUITE_P(Tiny, TinyAgreement,
                         ::testing::Values("llama", "qwen2", "qwen3", "gemma3", "llama3", "mixtral", "qwen3_moe",
                                           "qwen2_moe", "gemma2", "phi3", "granite", "smollm3", "glm4", "ministral3",
                                           "mistral3", "olmo2", "granite4", "qwen3_5"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// "Preset:recipe" entries of FOLIO_AGREEMENT_DUMMY, or SmolLM2's shape.
std::vector<std::pair<std::string, std::string>> dummy_cases() {
  std::vector<std::pair<std::string, std::string>> out;
  const char* env = std::getenv("FOLIO_AGREEMENT_DUMMY");
  std::stringstream list(env != nullptr && *env != '\0' ? env : "SmolLM2-135M:q4_k_m");
  for (std::string item; std::getline(list, item, ',');) {
    const auto colon = item.find(':');
    out.emplace_back(item.substr(0, colon), colon == std::string::npos ? "q4_k_m" : item.substr(colon + 1));
  }
  return out;
}

TEST(DummyAgreement, PresetLogitsAgreeWithTheCpuBackend) {
  for (const auto& [preset, recipe] : dummy_cases()) {
    std::mt19937 rng(17);
    const DummyPreset* p = nullptr;
    for (const DummyPreset& d : dummy_presets())
      if (d.config.name == preset) p = &d;
    ASSERT_NE(p, nullptr) << preset;
    std::vector<std::vector<TokenId>> seqs(2);
    for (auto& s : seqs)
      for (int i = 0; i < 24; ++i) s.push_back(static_cast<TokenId>(rng() % p->config.vocab_size));
    const DummyModelOptions o{preset, recipe, 0};
    expect_agreement(
        "dummy " + preset + " " + recipe, [&](Backend& be) { return load_dummy_model(o, be); }, seqs);
  }
}

}  // namespace
}  // namespace folio
