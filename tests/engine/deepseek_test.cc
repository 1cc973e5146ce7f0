// DeepSeek-V2 and V3 (issue 41) on their tiny random-weight checkpoints
// (tests/data/tiny/deepseek_v2, deepseek_v3; scripts/make_family_models.py):
// latent attention without q_lora (V2) and with it (V3, under DeepSeek YaRN
// with the softmax-scale correction), a dense first layer, V2's softmax
// router over 4 groups scored by their best expert, V3's sigmoid router with
// a random correction bias over 4 groups scored by their top two, routed
// scaling and a shared expert. Each format is held to its reference: the
// Hugging Face directory to transformers (fp32); V3's GGUF file to llama.cpp
// (F32 weights and K/V cache). llama.cpp scores V2's groups by their top two
// (V3's rule), so V2's GGUF file, which holds the checkpoint's numbers, is
// held to transformers. At every position where the reference's top-1 beats
// its top-2 clearly, folio's top-1 is the reference's, and the
// log-probabilities of the reference's top-8 agree within kMaxLogprobDiff.
// The engine on both (batching, chunked prefill, prefix hits, preemption:
// no greedy output changes, ==) is family_model_test.cc's FamilyEngineTest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/model_loader.h"
#include "support/reference_agreement.h"
#include "support/greedy_runner.h"
#include "support/temp_path.h"
#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

using folio::testing::Agreement;
using folio::testing::GreedyRunner;
using folio::testing::load_reference;
using folio::testing::tiny_dir;

// f32 against f32; the figures print (the absorbed weights are folded in
// f64 and rounded to f32 once, so the sums run in another order than
// transformers').
constexpr double kMaxLogprobDiff = 1e-3;

void expect_agreement(const Agreement& a, const std::string& what) {
  std::printf("[%s]: %d positions, top-1 agrees at %d of %d decisive, max |logprob diff| %.2e\n", what.c_str(),
              a.positions, a.decisive_agree, a.decisive, a.max_logprob_diff);
  EXPECT_EQ(a.decisive_agree, a.decisive) << what;
  EXPECT_GT(a.decisive, a.positions * 9 / 10) << what;
  EXPECT_LE(a.max_logprob_diff, kMaxLogprobDiff) << what;
}

class DeepseekTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DeepseekTest, CheckpointMatchesTransformers) {
  const nlohmann::json ref = load_reference(GetParam());
  const auto backend = folio::testing::make_test_backend(0, "f32");
  LoadedModel model = load_model(tiny_dir(GetParam()), *backend);
  ASSERT_EQ(model.config.vocab_size, ref["vocab_size"].get<std::int64_t>());
  expect_agreement(folio::testing::compare_with_reference(*backend, model, ref, "transformers"),
                   std::string(GetParam()) + "] HF directory vs [transformers");
}

TEST_P(DeepseekTest, GgufFileMatchesItsReference) {
  const nlohmann::json ref = load_reference(GetParam());
  const auto backend = folio::testing::make_test_backend(0, "f32");
  LoadedModel model = load_model(tiny_dir(GetParam()) + "/model.gguf", *backend);
  // V2's groups are scored by their best expert, which llama.cpp does not do.
  const bool v2 = std::string(GetParam()) == "deepseek_v2";
  const char* leg = v2 ? "transformers" : "llama_cpp";
  expect_agreement(folio::testing::compare_with_reference(*backend, model, ref, leg), std::string(GetParam()) + "] GGUF file vs [" + leg);
}

// Both formats give the same engine-facing config: one K/V head of
// kv_lora_rank + rope dims with values of kv_lora_rank (the latent cache),
// the expanded heads' softmax scale, and the router's rules.
TEST_P(DeepseekTest, BothFormatsReadTheSameConfig) {
  const auto backend = folio::testing::make_test_backend(1, "f32");
  LoadedModel hf = load_model(tiny_dir(GetParam()), *backend);
  LoadedModel gguf = load_model(tiny_dir(GetParam()) + "/model.gguf", *backend);
  const ModelConfig &a = hf.config, &b = gguf.config;
  const bool v3 = std::string(GetParam()) == "deepseek_v3";
  for (const ModelConfig* c : {&a, &b}) {
    EXPECT_EQ(c->num_kv_heads, 1);
    EXPECT_EQ(c->kv_lora_rank, 32);
    EXPECT_EQ(c->head_dim, 32 + 8);
    EXPECT_EQ(c->value_head_dim, 32);
    EXPECT_EQ(c->qk_nope_head_dim, 16);
    EXPECT_EQ(c->mla_value_head_dim, 16);
    EXPECT_EQ(c->q_lora_rank, v3 ? 24 : 0);
    EXPECT_EQ(c->num_dense_layers, 1);
    EXPECT_EQ(c->shared_expert_intermediate_size, 16);
    EXPECT_EQ(c->routing.sigmoid, v3);
    EXPECT_EQ(c->routing.group_top2, v3);
    EXPECT_EQ(c->routing.normalize, v3);
    EXPECT_EQ(c->routing.num_groups, 4);
    EXPECT_EQ(c->routing.groups_used, 2);
    EXPECT_FLOAT_EQ(c->routing.scale, v3 ? 2.5f : 1.5f);
    // Per token and layer: the key row (rotary key and latent) and the
    // latent again as the value row, here in f16.
    EXPECT_EQ(c->kv_bytes_per_token(2), c->num_layers * (8 + 32 + 32) * 2);
  }
  // V3: YaRN x4 with mscale_all_dim 1 -> (0.1 ln 4 + 1)^2 / sqrt(16 + 8).
  const double mscale = v3 ? 0.1 * std::log(4.0) + 1.0 : 1.0;
  EXPECT_FLOAT_EQ(a.attention_scale, static_cast<float>(mscale * mscale / std::sqrt(24.0)));
  EXPECT_FLOAT_EQ(a.attention_scale, b.attention_scale);
  EXPECT_EQ(a.rope.scaling, b.rope.scaling);
  EXPECT_EQ(a.rope.dim, b.rope.dim);
  EXPECT_EQ(a.rope.style, b.rope.style);
  EXPECT_EQ(a.context_length, b.context_length);
}

INSTANTIATE_TEST_SUITE_P(Tiny, DeepseekTest, ::testing::Values("deepseek_v2", "deepseek_v3"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// llama.cpp's older deepseek2 layout keeps each layer's kv_b whole
// ([heads * (nope + v), kv_lora]); the newer one (what the pinned converter
// writes) splits it into k_b ([heads, kv_lora, nope], transposed) and v_b
// ([heads, v, kv_lora]). The V3 file rewritten in the older layout gives the
// same logits, bit for bit.
TEST(DeepseekGguf, TheOlderKvBLayoutGivesTheSameLogits) {
  const std::string from = tiny_dir("deepseek_v3") + "/model.gguf";
  const GgufFile src = GgufFile::open(from);
  const std::int64_t N = 4, P = 16, V = 16, K = 32;
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) w.set(key, GgufMetaValue::from(value));
  std::vector<std::pair<std::string, std::vector<float>>> kv_b;  // per layer, [N * (P + V), K]
  for (const GgufTensorInfo& t : src.tensors()) {
    if (t.name.ends_with("attn_v_b.weight")) continue;
    if (!t.name.ends_with("attn_k_b.weight")) {
      w.add_tensor(t.name, t.type, std::vector<std::int64_t>(t.shape.begin(), t.shape.begin() + t.num_dims));
      continue;
    }
    const std::string layer = t.name.substr(0, t.name.size() - std::string("attn_k_b.weight").size());
    const GgufTensorInfo* v = src.find_tensor(layer + "attn_v_b.weight");
    ASSERT_NE(v, nullptr);
    ASSERT_EQ(t.type, DType::F32);
    const auto* k_b = reinterpret_cast<const float*>(t.data);  // [N, K, P]
    const auto* v_b = reinterpret_cast<const float*>(v->data);  // [N, V, K]
    std::vector<float> whole(static_cast<std::size_t>(N * (P + V) * K));
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < K; ++k) {
        for (std::int64_t p = 0; p < P; ++p) whole[(i * (P + V) + p) * K + k] = k_b[(i * K + k) * P + p];
        for (std::int64_t c = 0; c < V; ++c) whole[(i * (P + V) + P + c) * K + k] = v_b[(i * V + c) * K + k];
      }
    w.add_tensor(layer + "attn_kv_b.weight", DType::F32, {K, N * (P + V)});
    kv_b.push_back({layer + "attn_kv_b.weight", std::move(whole)});
  }
  ASSERT_EQ(kv_b.size(), 3u);
  const folio::testing::TempPath to("deepseek_kv_b.gguf");
  w.begin(to.str());
  for (const GgufTensorInfo& t : src.tensors()) {
    if (t.name.ends_with("attn_v_b.weight")) continue;
    if (t.name.ends_with("attn_k_b.weight")) {
      const std::string name = t.name.substr(0, t.name.size() - std::string("attn_k_b.weight").size()) + "attn_kv_b.weight";
      const auto& numbers = std::find_if(kv_b.begin(), kv_b.end(), [&](auto& e) { return e.first == name; })->second;
      w.write_tensor_data(name, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(numbers.data()),
                                                              numbers.size() * sizeof(float)));
      continue;
    }
    w.write_tensor_data(t.name, std::span<const std::uint8_t>(t.data, t.size_bytes));
  }
  w.finish();

  const auto backend = folio::testing::make_test_backend(1, "f32");
  LoadedModel split = load_model(from, *backend);
  LoadedModel whole = load_model(to.str(), *backend);
  const nlohmann::json ref = load_reference("deepseek_v3");
  const std::vector<TokenId> ids = ref["sequences"][2]["token_ids"].get<std::vector<TokenId>>();
  GreedyRunner a(*backend, split, 256, 1), b(*backend, whole, 256, 1);
  EXPECT_EQ(a.teacher_forced(ids), b.teacher_forced(ids));
}

// V3's GGUF file with keys replaced and tensors left out.
void rewrite_gguf(const std::string& from, const std::string& to,
                  const std::vector<std::pair<std::string, GgufMetaValue>>& set, const std::string& drop) {
  const GgufFile src = GgufFile::open(from);
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) w.set(key, GgufMetaValue::from(value));
  for (const auto& [key, value] : set) w.set(key, value);
  for (const GgufTensorInfo& t : src.tensors())
    if (t.name != drop) w.add_tensor(t.name, t.type, std::vector<std::int64_t>(t.shape.begin(), t.shape.begin() + t.num_dims));
  w.begin(to);
  for (const GgufTensorInfo& t : src.tensors())
    if (t.name != drop) w.write_tensor_data(t.name, std::span<const std::uint8_t>(t.data, t.size_bytes));
  w.finish();
}

// Latent attention's and the router's keys that do not fit together are
// refused with what is wrong, never a crash or a silently wrong model.
TEST(DeepseekGguf, BrokenLatentAttentionAndRouterKeysAreRefusedClearly) {
  struct Case {
    std::vector<std::pair<std::string, GgufMetaValue>> set;
    std::string drop;
    const char* message;
  };
  const Case cases[] = {
      {{{"deepseek2.expert_group_count", GgufMetaValue::u32(3)}}, "",
       "8 experts in 3 groups with 2 used: the groups must split the experts evenly"},
      {{{"deepseek2.expert_used_count", GgufMetaValue::u32(5)}}, "",
       "5 experts per token, but the 2 groups kept hold only 4"},
      {{{"deepseek2.expert_gating_func", GgufMetaValue::u32(3)}}, "",
       "expert_gating_func 3 is neither 1 (softmax) nor 2 (sigmoid)"},
      {{{"deepseek2.attention.key_length", GgufMetaValue::u32(44)}}, "",
       "key_length 44 / value_length 32 / head_count_kv 1 are not latent attention's 40 / 32 / 1"},
      {{}, "blk.1.attn_k_b.weight", "blk.1.attn_k_b.weight"},
  };
  const auto backend = folio::testing::make_test_backend(1, "f32");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    folio::testing::TempPath path;
    rewrite_gguf(tiny_dir("deepseek_v3") + "/model.gguf", path.str(), c.set, c.drop);
    try {
      load_model(path.str(), *backend);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace folio
