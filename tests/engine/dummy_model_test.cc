// --load-format dummy: presets of the published shapes (their parameter
// counts are kv-calc's), random weights in the types a quantize recipe gives
// them, a byte-level tokenizer, and a session the engine runs like any other:
// reproducibly from one seed, on whichever backend the tests run.
#include "model/dummy_model.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine.h"
#include "kv/capacity_planner.h"
#include "support/test_backend.h"

namespace folio {
namespace {

TEST(DummyModel, PresetsHaveTheKvCalcShapesAndParameterCounts) {
  ASSERT_FALSE(dummy_presets().empty());
  for (const DummyPreset& p : dummy_presets()) {
    const auto kv = find_model_preset(p.config.name);
    ASSERT_TRUE(kv) << p.config.name << " is no kv-calc preset";
    EXPECT_EQ(p.num_params, kv->num_params) << p.config.name;
    EXPECT_EQ(p.config.num_layers, kv->num_layers) << p.config.name;
    EXPECT_EQ(p.config.num_kv_heads, kv->num_kv_heads) << p.config.name;
    EXPECT_EQ(p.config.head_dim, kv->head_dim) << p.config.name;
  }
}

std::shared_ptr<ModelSession> open_dummy(const std::string& preset, const std::string& weights) {
  ModelSessionOptions o;
  o.model_path = preset;
  o.load_format = "dummy";
  o.dummy_weights = weights;
  o.backend = folio::testing::test_backend_options(2);
  return open_model_session(o);
}

std::vector<TokenId> generate(const std::shared_ptr<ModelSession>& session, const std::string& text, int n) {
  EngineConfig c;
  c.max_model_len = 256;
  c.kv_num_blocks = 64;
  Engine engine(session, c);
  EngineRequest r;
  r.prompt = session->tokenizer->encode(text, true, false);
  r.params.temperature = 0;
  r.params.max_tokens = n;
  r.params.ignore_eos = true;
  auto stream = engine.submit(r);
  std::vector<TokenId> tokens;
  while (auto out = stream->next()) {
    EXPECT_EQ(out->error, "");
    for (const auto& d : out->deltas) tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
    if (out->finished) break;
  }
  return tokens;
}

TEST(DummyModel, SmolLM2ShapeLoadsInTheRecipesTypesAndGeneratesReproducibly) {
  auto session = open_dummy("smollm2_135m", "q4_k_m");
  EXPECT_EQ(session->loaded.path, "dummy:SmolLM2-135M");
  EXPECT_EQ(session->config().vocab_size, 49152);
  EXPECT_EQ(session->config().hidden_size, 576);
  EXPECT_TRUE(session->config().tied_embeddings);
  const Weights& w = *session->loaded.weights;
  // q4_k_m's plan: rows of 576 are no whole K blocks (q4_k -> q5_0, the tied
  // output's q6_k -> q8_0); layer 0's FFN down projection gets 6 bits.
  EXPECT_EQ(w.find("token_embd.weight")->dtype, DType::Q8_0);
  EXPECT_EQ(w.find("blk.0.attn_q.weight")->dtype, DType::Q5_0);
  EXPECT_EQ(w.find("blk.0.ffn_down.weight")->dtype, DType::Q6_K);
  EXPECT_EQ(w.find("blk.4.ffn_down.weight")->dtype, DType::Q4_K);
  EXPECT_EQ(w.find("blk.0.attn_norm.weight")->dtype, DType::F32);
  const std::vector<TokenId> first = generate(session, "Once upon a time", 8);
  EXPECT_EQ(first.size(), 8u);
  // The same seed makes the same weights, so the same tokens.
  EXPECT_EQ(generate(open_dummy("SmolLM2-135M", "q4_k_m"), "Once upon a time", 8), first);
}

TEST(DummyModel, EveryWeightTypeTheKernelsReadLoads) {
  for (const char* recipe :
       {"f16", "q8_0", "q4_0", "q5_1", "q6_k", "q5_k_m", "iq4_nl", "iq4_xs", "mxfp4", "nvfp4"}) {
    auto session = open_dummy("SmolLM2-135M", recipe);
    EXPECT_EQ(generate(session, "abc", 2).size(), 2u) << recipe;
  }
}

TEST(DummyModel, UnknownPresetsAndRecipesAreRefusedWithTheChoices) {
  try {
    open_dummy("Llama-9-1B", "q4_k_m");
    FAIL() << "an unknown preset loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Qwen2.5-1.5B"), std::string::npos) << e.what();
  }
  EXPECT_THROW(open_dummy("SmolLM2-135M", "q3_z"), Error);
}

}  // namespace
}  // namespace folio
