// The rotary tables of the scalings, against figures that can be derived by
// hand or read in the published configs: YaRN keeps the fast pairs and
// interpolates the slow ones by its factor, with cos/sin scaled by 0.1 ln s +
// 1 (gpt-oss: s = 32, 1.3466) or by DeepSeek's mscale ratio (V3: 1);
// LongRoPE divides each pair by its own factor, short or long by the
// engine's context, with sqrt(1 + ln s / ln L0) (Phi-3-mini-128k: 1.1902);
// config.json and GGUF keys are read into the same RopeConfig; a longer
// context than the scaling supports is refused with the reason.
#include "model/rotary.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/hf_config.h"

namespace folio {
namespace {

ModelConfig base_config(int dim, float base) {
  ModelConfig c;
  c.name = "test";
  c.head_dim = dim;
  c.rope.dim = dim;
  c.rope.base = base;
  c.context_length = 4096;
  c.rope.original_context = 4096;
  return c;
}

TEST(Rotary, YarnKeepsFastPairsAndInterpolatesSlowOnes) {
  ModelConfig c = base_config(64, 10000.0f);
  c.rope.scaling = RopeScaling::kYarn;
  c.rope.factor = 4.0f;
  const std::vector<float> plain = [&] {
    ModelConfig p = c;
    p.rope.scaling = RopeScaling::kNone;
    return rope_inv_freq(p);
  }();
  const std::vector<float> yarn = rope_inv_freq(c);
  ASSERT_EQ(yarn.size(), 32u);
  // The correction range: pairs below floor(low) turn more than 32 times
  // over 4096 positions and stay; pairs above ceil(high) turn less than once
  // and are divided by 4.
  const double low = 64 * std::log(4096 / (32 * 2 * M_PI)) / (2 * std::log(10000.0));
  const double high = 64 * std::log(4096 / (1 * 2 * M_PI)) / (2 * std::log(10000.0));
  for (int i = 0; i < 32; ++i) {
    if (i <= std::floor(low)) {
      EXPECT_EQ(yarn[i], plain[i]) << i;
    } else if (i >= std::ceil(high)) {
      EXPECT_FLOAT_EQ(yarn[i], plain[i] / 4.0f) << i;
    } else {
      EXPECT_LT(yarn[i], plain[i]) << i;
      EXPECT_GT(yarn[i], plain[i] / 4.0f) << i;
    }
  }
  EXPECT_NEAR(rope_attention_factor(c.rope), 0.1 * std::log(4.0) + 1.0, 1e-12);
}

TEST(Rotary, YarnAttentionFactorOfPublishedConfigs) {
  RopeConfig gpt_oss;
  gpt_oss.scaling = RopeScaling::kYarn;
  gpt_oss.factor = 32.0f;
  EXPECT_NEAR(rope_attention_factor(gpt_oss), 1.3466, 1e-4);
  RopeConfig deepseek = gpt_oss;  // DeepSeek-V3: factor 40, mscale = mscale_all_dim = 1
  deepseek.factor = 40.0f;
  deepseek.mscale = 1.0f;
  deepseek.mscale_all_dim = 1.0f;
  EXPECT_EQ(rope_attention_factor(deepseek), 1.0);
  deepseek.mscale = 0.707f;  // unequal: their ratio
  EXPECT_NEAR(rope_attention_factor(deepseek), (0.0707 * std::log(40.0) + 1) / (0.1 * std::log(40.0) + 1), 1e-6);
  RopeConfig given = gpt_oss;
  given.attention_factor = 1.25f;
  EXPECT_EQ(rope_attention_factor(given), 1.25);
}

TEST(Rotary, LongRopeDividesEachPairByItsFactor) {
  ModelConfig c = base_config(8, 10000.0f);
  c.rope.scaling = RopeScaling::kLongRope;
  c.rope.factor = 32.0f;  // Phi-3-mini-128k: 131072 / 4096
  c.rope.short_factors = {1.0f, 1.5f, 2.0f, 4.0f};
  c.rope.long_factors = {1.0f, 3.0f, 9.0f, 27.0f};
  const std::vector<float> short_table = rope_inv_freq(c), long_table = rope_inv_freq(c, true);
  for (int i = 0; i < 4; ++i) {
    const double f = 1.0 / std::pow(10000.0, 2.0 * i / 8);
    EXPECT_FLOAT_EQ(short_table[i], static_cast<float>(f / c.rope.short_factors[i]));
    EXPECT_FLOAT_EQ(long_table[i], static_cast<float>(f / c.rope.long_factors[i]));
  }
  EXPECT_NEAR(rope_attention_factor(c.rope), 1.1902, 1e-4);
  EXPECT_FALSE(rope_long_factors(c.rope, 4096));
  EXPECT_TRUE(rope_long_factors(c.rope, 4097));
}

HfConfig hf(const char* text) { return HfConfig(nlohmann::json::parse(text), "config.json"); }

TEST(Rotary, ConfigJsonYarnStretchesTheContext) {
  // Qwen2.5's long-context recipe: YaRN x4 over its 32768 tokens.
  ModelConfig c = ModelConfig::from_hf(hf(R"({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
      "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 32768,
      "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})"));
  EXPECT_EQ(c.rope.scaling, RopeScaling::kYarn);
  EXPECT_EQ(c.rope.original_context, 32768);
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_EQ(c.rope.beta_fast, 32.0f);
  EXPECT_EQ(c.rope.beta_slow, 1.0f);
  EXPECT_TRUE(c.rope.truncate);
  EXPECT_EQ(context_limit_reason(c), "32768 trained x yarn rope scaling factor 4");
}

TEST(Rotary, ConfigJsonLongRopeTakesPhi3sTopLevelContext) {
  ModelConfig c = ModelConfig::from_hf(hf(R"({"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
      "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 131072,
      "original_max_position_embeddings": 4096, "partial_rotary_factor": 0.5,
      "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1], "long_factor": [2, 2, 2, 2],
                       "original_max_position_embeddings": 999}})"));
  EXPECT_EQ(c.rope.scaling, RopeScaling::kLongRope);
  EXPECT_EQ(c.rope.dim, 8);
  EXPECT_EQ(c.rope.original_context, 4096);
  EXPECT_EQ(c.rope.factor, 32.0f);
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_EQ(c.rope.long_factors, (std::vector<float>{2, 2, 2, 2}));
}

TEST(Rotary, BadScalingIsRefusedClearly) {
  const char* cases[][2] = {
      {R"({"type": "longrope", "short_factor": [1, 1], "long_factor": [1, 1, 1, 1]})",
       "longrope has 2 short and 4 long factors; the rotary table has 4 pairs"},
      {R"({"type": "longrope", "short_factor": [1, 1, 1, 1]})", "longrope scaling needs rope_scaling.long_factor"},
      {R"({"type": "longrope", "short_factor": [1, 1, 1, 0], "long_factor": [1, 1, 1, 1]})",
       "longrope factor 0 must be positive"},
      {R"({"type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 2})", "yarn needs beta_fast > beta_slow > 0"},
      {R"({"type": "ntk-by-parts"})", "rope scaling \"ntk-by-parts\" is not supported"},
  };
  for (const auto& [scaling, message] : cases) {
    SCOPED_TRACE(scaling);
    // Heads of 8: four rotated pairs.
    const std::string text = std::string(R"({"num_hidden_layers": 2, "hidden_size": 32, "intermediate_size": 128,
        "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 4096, "rope_scaling": )") +
                             scaling + "}";
    try {
      ModelConfig::from_hf(hf(text.c_str()));
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(Rotary, ContextLimitsSayWhy) {
  ModelConfig c = base_config(64, 10000.0f);
  EXPECT_EQ(context_limit_reason(c), "its trained length; its config has no rope scaling that extends it");
  c.rope.scaling = RopeScaling::kDynamic;
  EXPECT_NE(context_limit_reason(c).find("within the trained context only"), std::string::npos);
  // Dynamic NTK within the trained context is the plain table.
  ModelConfig plain = base_config(64, 10000.0f);
  c.rope.factor = 2.0f;
  EXPECT_EQ(rope_inv_freq(c), rope_inv_freq(plain));
}

}  // namespace
}  // namespace folio
