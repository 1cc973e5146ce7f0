// Hugging Face checkpoints end to end: the tiny randomly initialised models
// of tests/data/tiny (scripts/make_tiny_models.py) loaded from their
// directories, their logits against transformers' fp32 logits on folio's f32
// path, and their greedy continuations against transformers' own.
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

// |folio - transformers| <= kRelative * max(|transformers|, 1) at every logit.
constexpr double kRelative = 1e-3;

struct Reference {
  nlohmann::json json;
  std::vector<float> logits;  // every position of every sequence, [positions, vocab]
};

std::string tiny_dir(const std::string& name) { return folio::testing::source_path("tests/data/tiny/" + name); }

Reference load_reference(const std::string& name) {
  Reference r;
  std::ifstream in(tiny_dir(name) + "/reference.json");
  EXPECT_TRUE(in.good()) << "missing " << name << "; run scripts/make_tiny_models.py";
  r.json = nlohmann::json::parse(in);
  std::ifstream bin(tiny_dir(name) + "/logits.f32", std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(bin), std::istreambuf_iterator<char>()};
  r.logits.resize(bytes.size() / sizeof(float));
  std::memcpy(r.logits.data(), bytes.data(), r.logits.size() * sizeof(float));
  return r;
}

class TinyModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyModelTest, LogitsMatchTransformersInF32) {
  const Reference ref = load_reference(GetParam());
  CpuBackend backend(0, {}, MatmulPrecision::kF32);
  LoadedModel model = load_model(tiny_dir(GetParam()), backend);
  ASSERT_EQ(model.config.vocab_size, ref.json["vocab_size"].get<std::int64_t>());
  GreedyRunner runner(backend, model, 64, 1);
  const std::int64_t V = runner.vocab_size();

  double max_diff = 0, max_relative = 0;
  std::size_t row = 0;
  for (const auto& seq : ref.json["token_ids"]) {
    const std::vector<TokenId> ids = seq.get<std::vector<TokenId>>();
    const std::vector<float> logits = runner.teacher_forced(ids);
    ASSERT_LE((row + ids.size()) * static_cast<std::size_t>(V), ref.logits.size());
    for (std::size_t i = 0; i < ids.size() * static_cast<std::size_t>(V); ++i) {
      const double want = ref.logits[row * static_cast<std::size_t>(V) + i];
      const double diff = std::abs(logits[i] - want);
      max_diff = std::max(max_diff, diff);
      max_relative = std::max(max_relative, diff / std::max(std::abs(want), 1.0));
    }
    row += ids.size();
  }
  EXPECT_EQ(row * static_cast<std::size_t>(V), ref.logits.size());
  std::printf("[%s] %zu positions: max |logit diff| %.2e, max relative %.2e (max |logit| %.2f)\n", GetParam(), row,
              max_diff, max_relative, ref.json["max_abs_logit"].get<double>());
  RecordProperty("max_logit_diff", std::to_string(max_diff));
  EXPECT_LE(max_relative, kRelative);
}

TEST_P(TinyModelTest, GreedyTokensEqualTransformers) {
  const Reference ref = load_reference(GetParam());
  CpuBackend backend(0, {}, MatmulPrecision::kF32);
  LoadedModel model = load_model(tiny_dir(GetParam()), backend);
  std::vector<std::vector<TokenId>> prompts;
  for (const auto& seq : ref.json["token_ids"]) prompts.push_back(seq.get<std::vector<TokenId>>());
  const int steps = static_cast<int>(ref.json["greedy"][0]["tokens"].size());
  GreedyRunner runner(backend, model, 64, static_cast<std::int64_t>(prompts.size()));
  const std::vector<std::vector<TokenId>> got = runner.greedy(prompts, steps, {});
  ASSERT_EQ(got.size(), prompts.size());
  for (std::size_t p = 0; p < prompts.size(); ++p)
    EXPECT_EQ(got[p], ref.json["greedy"][p]["tokens"].get<std::vector<TokenId>>()) << "sequence " << p;
}

INSTANTIATE_TEST_SUITE_P(Tiny, TinyModelTest, ::testing::Values("llama", "qwen2", "qwen3", "gemma3", "llama3"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

TEST(TinyModelConfig, ReadsConfigJsonIntoTheSameConfig) {
  CpuBackend backend(1, {}, MatmulPrecision::kF32);
  LoadedModel llama = load_model(tiny_dir("llama"), backend);
  EXPECT_EQ(llama.config.architecture, "llama");
  EXPECT_EQ(llama.config.name, "llama");
  EXPECT_EQ(llama.config.num_layers, 2);
  EXPECT_EQ(llama.config.num_heads, 4);
  EXPECT_EQ(llama.config.num_kv_heads, 2);
  EXPECT_EQ(llama.config.head_dim, 16);
  EXPECT_EQ(llama.config.rope.style, RopeStyle::kNeox);  // HF rows are not permuted
  EXPECT_EQ(llama.config.rope.base, 50000.0f);
  EXPECT_FALSE(llama.config.tied_embeddings);
  EXPECT_EQ(llama.file, nullptr);
  EXPECT_EQ(llama.hf->shards().size(), 11u);
  EXPECT_EQ(llama.mapped_bytes().size(), 11u);

  LoadedModel qwen2 = load_model(tiny_dir("qwen2"), backend);
  EXPECT_TRUE(qwen2.config.tied_embeddings);
  EXPECT_TRUE(qwen2.config.attention_bias);
  EXPECT_EQ(qwen2.weights->find("blk.0.attn_q.weight")->dtype, DType::BF16);
  EXPECT_EQ(qwen2.weights->find("blk.0.attn_q.bias")->dtype, DType::F32);  // 1-D: converted
  EXPECT_EQ(qwen2.weights->find("output.weight"), nullptr);

  LoadedModel qwen3 = load_model(tiny_dir("qwen3"), backend);
  EXPECT_EQ(qwen3.config.architecture, "qwen3");
  EXPECT_EQ(qwen3.config.head_dim, 32);
  EXPECT_EQ(qwen3.config.q_dim(), 128);  // not the hidden size

  LoadedModel llama3 = load_model(tiny_dir("llama3"), backend);
  EXPECT_EQ(llama3.config.rope.scaling, RopeScaling::kLlama3);
  EXPECT_EQ(llama3.config.rope.factor, 8.0f);
  EXPECT_EQ(llama3.config.rope.original_context, 64);
  EXPECT_EQ(llama3.weights->find("blk.1.ffn_up.weight")->dtype, DType::F16);

  LoadedModel gemma3 = load_model(tiny_dir("gemma3"), backend);
  EXPECT_EQ(gemma3.config.sliding_window, (std::vector<std::int64_t>{4, 4, 0}));
  EXPECT_FLOAT_EQ(gemma3.config.attention_scale, 1.0f / std::sqrt(24.0f));
}

}  // namespace
}  // namespace folio
