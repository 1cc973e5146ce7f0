// The families of issues 39 and 40 (gpt-oss, tests/engine/gpt_oss_test.cc
// has more of it) on their tiny random-weight checkpoints
// (tests/data/tiny/<family>, scripts/make_family_models.py), each read from
// both formats and held to that format's reference: the Hugging Face
// directory to transformers (fp32), the GGUF file llama.cpp's own converter
// made of it to llama.cpp (F32 weights and K/V cache). The sequences cross
// every sliding window, LongRoPE's switch (run on both sides of it, with
// the context the references ran: LongRoPE picks its factors by it) and
// Ministral 3's temperature periods. At every position where the reference's
// top-1/top-2 margin is clear, folio's top-1 is the reference's, and the
// log-probabilities of the reference's top-8 tokens agree within
// kMaxLogprobDiff. Then the engine on one checkpoint of each family:
// batching, chunked prefill, prefix-cache hits and preemption never change a
// greedy output (rule 5, ==).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"
#include "kv/capacity_planner.h"
#include "kv/kv_storage.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/model_loader.h"
#include "support/engine_invariance.h"
#include "support/reference_agreement.h"
#include "support/greedy_runner.h"
#include "support/test_backend.h"
#include "support/temp_path.h"
#include "support/test_models.h"

namespace folio {
namespace {

using folio::testing::Agreement;
using folio::testing::GreedyRunner;
using folio::testing::load_reference;
using folio::testing::tiny_dir;

// |folio logprob - reference logprob| over the reference's top-8 tokens of
// every position, f32 against f32 (measured at most ~2e-5; the figures print).
constexpr double kMaxLogprobDiff = 1e-3;
// Gemma 2's GGUF leg: ggml's CPU GELU looks its inputs up in a table of f16
// values (GGML_GELU_FP16), which moves llama.cpp's own log-probabilities up
// to 2.6e-3 from transformers' on this checkpoint (folio's HF leg: 2.4e-6).
constexpr double kMaxLogprobDiffGgmlGelu = 5e-3;
// Gemma 4's GGUF leg: llama.cpp's own logits are up to 1.6e-2 from
// transformers' on the tiny checkpoint (not pinned down: ggml's f16 GELU
// table, 2.6e-3 on Gemma 2's, is one likely part, with more GELUs here);
// folio's GGUF leg measured 1.2e-2 from llama.cpp, and is held to
// transformers besides.
constexpr double kMaxLogprobDiffGemma4LlamaCpp = 3e-2;

class FamilyModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FamilyModelTest, CheckpointMatchesTransformers) {
  const nlohmann::json ref = load_reference(GetParam());
  const auto backend = folio::testing::make_test_backend(0, "f32");
  LoadedModel model = load_model(tiny_dir(GetParam()), *backend);
  ASSERT_EQ(model.config.vocab_size, ref["vocab_size"].get<std::int64_t>());
  const Agreement a = folio::testing::compare_with_reference(*backend, model, ref, "transformers");
  std::printf("[%s] HF directory vs transformers: %d positions, top-1 agrees at %d of %d decisive, max |logprob "
              "diff| %.2e\n",
              GetParam(), a.positions, a.decisive_agree, a.decisive, a.max_logprob_diff);
  EXPECT_EQ(a.decisive_agree, a.decisive);
  EXPECT_GT(a.decisive, a.positions / 2);
  EXPECT_LE(a.max_logprob_diff, kMaxLogprobDiff);
}

TEST_P(FamilyModelTest, GgufFileMatchesLlamaCpp) {
  const nlohmann::json ref = load_reference(GetParam());
  const auto backend = folio::testing::make_test_backend(0, "f32");
  LoadedModel model = load_model(tiny_dir(GetParam()) + "/model.gguf", *backend);
  ASSERT_NE(model.file, nullptr);
  if (ref["sequences"][0].contains("transformers_truncated")) {
    // MXFP4 experts (gpt_oss): llama.cpp multiplies them by activations
    // rounded to Q8_0 with a binary16 scale, which moves this random model's
    // log-probabilities far from the exact ones (make_family_models.py
    // prints how far). The file is held to the exact numbers of what it
    // says: transformers on the same MXFP4 weights with YaRN's correction
    // range truncated, as GGUF cannot say otherwise (f32 activations); and
    // to llama.cpp by MxfpGgufFileMatchesLlamaCpp below.
    const Agreement a = folio::testing::compare_with_reference(*backend, model, ref, "transformers_truncated");
    std::printf("[%s] GGUF file vs transformers (truncated YaRN, the file's numbers): %d positions, top-1 agrees "
                "at %d of %d decisive, max |logprob diff| %.2e\n",
                GetParam(), a.positions, a.decisive_agree, a.decisive, a.max_logprob_diff);
    EXPECT_EQ(a.decisive_agree, a.decisive);
    EXPECT_GT(a.decisive, a.positions / 2);
    EXPECT_LE(a.max_logprob_diff, kMaxLogprobDiff);
    return;
  }
  const Agreement a = folio::testing::compare_with_reference(*backend, model, ref, "llama_cpp");
  std::printf("[%s] GGUF file vs llama.cpp: %d positions, top-1 agrees at %d of %d decisive, max |logprob diff| "
              "%.2e\n",
              GetParam(), a.positions, a.decisive_agree, a.decisive, a.max_logprob_diff);
  EXPECT_EQ(a.decisive_agree, a.decisive);
  EXPECT_GT(a.decisive, a.positions / 2);
  if (model.config.architecture == "gemma4") {
    // llama.cpp is itself 1.6e-2 from transformers on this checkpoint
    // (reference.json), folio's GGUF leg 1.2e-2 from llama.cpp and 2.4e-5
    // from transformers: the file is held to transformers as tightly as the
    // HF directory, to llama.cpp by kMaxLogprobDiffGemma4LlamaCpp.
    EXPECT_LE(a.max_logprob_diff, kMaxLogprobDiffGemma4LlamaCpp);
    const Agreement exact = folio::testing::compare_with_reference(*backend, model, ref, "transformers");
    std::printf("[%s] GGUF file vs transformers: top-1 agrees at %d of %d decisive, max |logprob diff| %.2e\n",
                GetParam(), exact.decisive_agree, exact.decisive, exact.max_logprob_diff);
    EXPECT_EQ(exact.decisive_agree, exact.decisive);
    EXPECT_LE(exact.max_logprob_diff, kMaxLogprobDiff);
    return;
  }
  const bool ggml_gelu = model.config.architecture == "gemma2";  // the GeGLU family here
  EXPECT_LE(a.max_logprob_diff, ggml_gelu ? kMaxLogprobDiffGgmlGelu : kMaxLogprobDiff);
}

// The MXFP4 GGUF file (gpt_oss) against llama.cpp itself. llama.cpp
// multiplies MXFP4 weights by activations rounded to Q8_0 (blocks of 32, a
// binary16 scale); folio's q8 matmuls round them to blocks of 32 too, with an
// f32 scale. That rounding flips near-tied router choices of this random
// model (four experts, the first scaled so that the clamp fires), so
// llama.cpp is itself up to 3.1 from the exact log-probabilities of its file
// (make_family_models.py measures it) and a bound of 1e-3 cannot hold: the
// bounds here are kMaxLogprobDiffMxfp4Q8 (measured 0.55) and top-1 equal
// wherever llama.cpp's top-1 leads by kMxfp4Margin logits (the misses
// measured lead by under 0.1).
constexpr double kMaxLogprobDiffMxfp4Q8 = 1.0;
constexpr double kMxfp4Margin = 0.2;

TEST(FamilyModel, Mxfp4GgufFileMatchesLlamaCpp) {
  const nlohmann::json ref = load_reference("gpt_oss");
  const auto backend = folio::testing::make_test_backend(0, "q8");
  LoadedModel model = load_model(tiny_dir("gpt_oss") + "/model.gguf", *backend);
  const Agreement a = folio::testing::compare_with_reference(*backend, model, ref, "llama_cpp", kMxfp4Margin);
  std::printf("[gpt_oss] GGUF file (q8 matmuls) vs llama.cpp: %d positions, top-1 agrees at %d of %d with a "
              "margin over %.1f, max |logprob diff| %.2e (llama.cpp vs the exact numbers: %.2f)\n",
              a.positions, a.decisive_agree, a.decisive, kMxfp4Margin, a.max_logprob_diff,
              ref["llama_cpp_vs_exact_max_logprob_diff"].get<double>());
  EXPECT_EQ(a.decisive_agree, a.decisive);
  EXPECT_GT(a.decisive, a.positions / 3);
  EXPECT_LE(a.max_logprob_diff, kMaxLogprobDiffMxfp4Q8);
}

// Granite 4's dense layout (GraniteMoeHybridForCausalLM, every layer
// attention, the shared MLP fused [gate; up]): the transformers leg only, as
// llama.cpp's converter makes a file of it that llama.cpp cannot load.
TEST(FamilyModel, Granite4DenseCheckpointMatchesTransformers) {
  const nlohmann::json ref = load_reference("granite4");
  const auto backend = folio::testing::make_test_backend(0, "f32");
  LoadedModel model = load_model(tiny_dir("granite4"), *backend);
  EXPECT_EQ(model.config.architecture, "granitehybrid");
  const Agreement a = folio::testing::compare_with_reference(*backend, model, ref, "transformers");
  std::printf("[granite4] HF directory vs transformers: %d positions, top-1 agrees at %d of %d decisive, max "
              "|logprob diff| %.2e\n",
              a.positions, a.decisive_agree, a.decisive, a.max_logprob_diff);
  EXPECT_EQ(a.decisive_agree, a.decisive);
  EXPECT_GT(a.decisive, a.positions / 2);
  EXPECT_LE(a.max_logprob_diff, kMaxLogprobDiff);
}

// Gemma 4's shared KV (tests/data/tiny/gemma4): layers 3 (sliding) and 4
// (global) read the caches of layers 1 and 2 and write none, so the pool
// holds blocks for three layers: two sliding ones of 2 KV heads x 16 and one
// global one of 1 x 32, 192 K and V numbers a token where five writing
// layers would need 320. The start-up budget (KvStorage) and kv-calc's
// planner (model_shape) count the same.
TEST(FamilyModel, Gemma4SharedKvLayersHaveNoPoolsOfTheirOwn) {
  const auto backend = folio::testing::make_test_backend(1, "f32");
  for (const std::string& path : {tiny_dir("gemma4"), tiny_dir("gemma4") + "/model.gguf"}) {
    SCOPED_TRACE(path);
    LoadedModel model = load_model(path, *backend);
    const ModelConfig& c = model.config;
    EXPECT_EQ(c.kv_source_layer, (std::vector<std::int64_t>{0, 1, 2, 1, 2}));
    EXPECT_EQ(c.layer_head_dim, (std::vector<std::int64_t>{16, 16, 32, 16, 32}));
    EXPECT_EQ(c.layer_num_kv_heads, (std::vector<std::int64_t>{2, 2, 1, 2, 1}));
    EXPECT_EQ(c.kv_bytes_per_token(2.0), 192 * 2);
    EXPECT_EQ(KvStorage::block_bytes(c, 16, KvCacheDType{}), std::uint64_t{192 * 2 * 16});
    EXPECT_EQ(kv_bytes_per_token(model_shape(c), *kv_number_format("f16")), 192 * 2);

    KvStorageOptions o;
    o.block_size = 16;
    o.num_blocks = 4;
    KvStorage storage(*backend, c, o);
    ASSERT_EQ(storage.layers().size(), 5u);
    EXPECT_EQ(storage.pools().size(), 3u);
    EXPECT_EQ(storage.layers()[3].k.codes.data, storage.layers()[1].k.codes.data);
    EXPECT_EQ(storage.layers()[4].v.codes.data, storage.layers()[2].v.codes.data);
    EXPECT_NE(storage.layers()[2].k.codes.data, storage.layers()[1].k.codes.data);
    EXPECT_EQ(storage.layers()[2].head_dim(), 32);
    EXPECT_EQ(storage.layers()[2].num_kv_heads(), 1);
    EXPECT_EQ(storage.layers()[0].head_dim(), 16);
    EXPECT_EQ(storage.layers()[0].num_kv_heads(), 2);
    EXPECT_GE(storage.total_bytes(), 4 * KvStorage::block_bytes(c, 16, KvCacheDType{}));
    EXPECT_LT(storage.total_bytes(), 4 * KvStorage::block_bytes(c, 16, KvCacheDType{}) + 3 * 4 * 64);
  }
}

// Both formats describe the same model: the same config where both carry it.
TEST_P(FamilyModelTest, BothFormatsReadTheSameConfig) {
  const auto backend = folio::testing::make_test_backend(1, "f32");
  LoadedModel hf = load_model(tiny_dir(GetParam()), *backend);
  LoadedModel gguf = load_model(tiny_dir(GetParam()) + "/model.gguf", *backend);
  const ModelConfig &a = hf.config, &b = gguf.config;
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rope.dim, b.rope.dim);
  EXPECT_EQ(a.rope.scaling, b.rope.scaling);
  EXPECT_EQ(a.rope.original_context, b.rope.original_context);
  EXPECT_EQ(a.context_length, b.context_length);
  EXPECT_EQ(a.rope.short_factors, b.rope.short_factors);
  EXPECT_EQ(a.rope.long_factors, b.rope.long_factors);
  EXPECT_FLOAT_EQ(a.rope.temperature_beta, b.rope.temperature_beta);
  EXPECT_EQ(a.rope.temperature_length, b.rope.temperature_length);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.rope_skipped, b.rope_skipped);
  EXPECT_FLOAT_EQ(a.attention_scale, b.attention_scale);
  EXPECT_FLOAT_EQ(a.attention_softcap, b.attention_softcap);
  EXPECT_FLOAT_EQ(a.final_logit_softcap, b.final_logit_softcap);
  EXPECT_FLOAT_EQ(a.embedding_scale, b.embedding_scale);
  EXPECT_FLOAT_EQ(a.residual_scale, b.residual_scale);
  EXPECT_FLOAT_EQ(a.logit_scale, b.logit_scale);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.layer_head_dim, b.layer_head_dim);
  EXPECT_EQ(a.layer_num_kv_heads, b.layer_num_kv_heads);
  EXPECT_EQ(a.layer_intermediate_size, b.layer_intermediate_size);
  EXPECT_EQ(a.kv_source_layer, b.kv_source_layer);
  EXPECT_EQ(a.per_layer_input_size, b.per_layer_input_size);
  EXPECT_FLOAT_EQ(a.sliding_rope_base, b.sliding_rope_base);
  EXPECT_EQ(a.rope_rotated_pairs, b.rope_rotated_pairs);
}

INSTANTIATE_TEST_SUITE_P(Tiny, FamilyModelTest,
                         ::testing::Values("gemma2", "phi3", "granite", "smollm3", "glm4", "ministral3", "mistral3",
                                           "olmo2", "gpt_oss", "gpt_oss_bf16", "gemma4", "qwen3_5"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// A family's GGUF file copied with its metadata or tensors changed: `set`
// replaces or adds keys, `drop` leaves tensors out, `shorten` writes a
// tensor's first `shorten.second` numbers only (f32).
struct GgufEdit {
  std::vector<std::pair<std::string, GgufMetaValue>> set;
  std::vector<std::string> drop;
  std::pair<std::string, std::int64_t> shorten;
};

void copy_gguf(const std::string& from, const std::string& to, const GgufEdit& edit) {
  const GgufFile src = GgufFile::open(from);
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) w.set(key, GgufMetaValue::from(value));
  for (const auto& [key, value] : edit.set) w.set(key, value);
  std::vector<const GgufTensorInfo*> kept;
  for (const GgufTensorInfo& t : src.tensors()) {
    if (std::find(edit.drop.begin(), edit.drop.end(), t.name) != edit.drop.end()) continue;
    std::vector<std::int64_t> shape(t.shape.begin(), t.shape.begin() + t.num_dims);
    if (t.name == edit.shorten.first) shape[0] = edit.shorten.second;
    w.add_tensor(t.name, t.type, shape);
    kept.push_back(&t);
  }
  w.begin(to);
  for (const GgufTensorInfo* t : kept) {
    const std::size_t bytes =
        t->name == edit.shorten.first ? static_cast<std::size_t>(edit.shorten.second) * sizeof(float) : t->size_bytes;
    w.write_tensor_data(t->name, std::span<const std::uint8_t>(t->data, bytes));
  }
  w.finish();
}

// Broken rotary scaling and family keys in GGUF files are refused with what
// is wrong, never a crash or a silently wrong table.
TEST(FamilyGguf, BrokenScalingAndFamilyKeysAreRefusedClearly) {
  struct Case {
    const char* family;
    GgufEdit edit;
    const char* message;
  };
  const Case cases[] = {
      {"phi3", {{}, {}, {"rope_factors_long.weight", 5}},
       "rope_factors_long.weight is [5] f32, expected f32 [6] (one factor per rotated pair)"},
      {"phi3", {{}, {"rope_factors_short.weight"}, {}},
       "longrope scaling needs the tensors rope_factors_short.weight and rope_factors_long.weight"},
      {"smollm3", {{{"smollm3.rope.scaling.yarn_beta_fast", GgufMetaValue::f32(0.5f)}}, {}, {}},
       "yarn needs beta_fast > beta_slow > 0, has 0.5 and 1"},
      {"smollm3", {{{"smollm3.rope.scaling.factor", GgufMetaValue::f32(-4.0f)}}, {}, {}},
       "rope scaling factor -4 must be positive"},
      {"ministral3", {{{"mistral3.rope.scaling.type", GgufMetaValue::string("ntk")}}, {}, {}},
       "rope scaling \"ntk\" is not supported (none, linear, yarn, longrope are)"},
      {"gemma2", {{{"gemma2.attention.sliding_window", GgufMetaValue::i32(-3)}}, {}, {}},
       "gemma2.attention.sliding_window -3 must be positive"},
      {"glm4", {{}, {"blk.1.ffn_up.weight"}, {}}, "tensor blk.1.ffn_up.weight is missing"},
  };
  const auto backend = folio::testing::make_test_backend(1, "f32");
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.family) + ": " + c.message);
    folio::testing::TempPath path;
    copy_gguf(tiny_dir(c.family) + "/model.gguf", path.str(), c.edit);
    try {
      load_model(path.str(), *backend);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// Checkpoints of tests/data/tiny run with other rope parameters or at longer
// positions (make_family_models.py's VARIANTS): reference.json names the base
// directory and the config.json keys it replaces; a copy of the base with
// them is made here. YaRN on Qwen3 (truncated, and gpt-oss's untruncated
// kind with an explicit attention factor), MistralForCausalLM (llama's
// weights with an 8-token sliding window), and Llama 3.1's scaling at 250
// tokens, four times past its trained 64: the HF leg against transformers,
// and for llama3_long the GGUF leg against llama.cpp, whose F16 weights it
// multiplies by F16-rounded activations (kMaxLogprobDiffF16Weights).
constexpr double kMaxLogprobDiffF16Weights = 1e-2;

class ScopedDir {
 public:
  ScopedDir() : path_(folio::testing::TempPath("").str()) { std::filesystem::create_directory(path_); }
  ~ScopedDir() { std::filesystem::remove_all(path_); }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

class RopeVariantTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RopeVariantTest, CheckpointMatchesTransformers) {
  const nlohmann::json ref = load_reference(GetParam());
  ScopedDir dir;
  for (const auto& entry : std::filesystem::directory_iterator(tiny_dir(ref["base"].get<std::string>())))
    std::filesystem::copy(entry.path(), dir.str() + "/" + entry.path().filename().string());
  if (!ref["config"].is_null()) {
    nlohmann::json config = nlohmann::json::parse(std::ifstream(dir.str() + "/config.json"));
    config.update(ref["config"]);
    std::ofstream(dir.str() + "/config.json") << config.dump(2);
  }
  const auto backend = folio::testing::make_test_backend(0, "f32");
  LoadedModel model = load_model(dir.str(), *backend);
  const Agreement a = folio::testing::compare_with_reference(*backend, model, ref, "transformers");
  std::printf("[%s] HF directory vs transformers: %d positions, top-1 agrees at %d of %d decisive, max |logprob "
              "diff| %.2e\n",
              GetParam(), a.positions, a.decisive_agree, a.decisive, a.max_logprob_diff);
  EXPECT_EQ(a.decisive_agree, a.decisive);
  EXPECT_GT(a.decisive, a.positions / 2);
  EXPECT_LE(a.max_logprob_diff, kMaxLogprobDiff);
  if (!std::filesystem::exists(tiny_dir(GetParam()) + "/model.gguf")) return;  // transformers only
  LoadedModel gguf = load_model(tiny_dir(GetParam()) + "/model.gguf", *backend);
  const Agreement g = folio::testing::compare_with_reference(*backend, gguf, ref, "llama_cpp");
  std::printf("[%s] GGUF file vs llama.cpp: %d positions, top-1 agrees at %d of %d decisive, max |logprob diff| "
              "%.2e\n",
              GetParam(), g.positions, g.decisive_agree, g.decisive, g.max_logprob_diff);
  EXPECT_EQ(g.decisive_agree, g.decisive);
  EXPECT_LE(g.max_logprob_diff, kMaxLogprobDiffF16Weights);
}

INSTANTIATE_TEST_SUITE_P(Tiny, RopeVariantTest,
                         ::testing::Values("qwen3_yarn", "qwen3_yarn_untruncated", "llama3_long", "mistral_window"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// The released Gemma 4 checkpoints are Gemma4ForConditionalGeneration, the
// text model's config under text_config: folio reads it as the text model.
TEST(FamilyModel, Gemma4ConditionalGenerationConfigRunsItsTextModel) {
  const nlohmann::json ref = load_reference("gemma4");
  ScopedDir dir;
  for (const auto& entry : std::filesystem::directory_iterator(tiny_dir("gemma4")))
    std::filesystem::copy(entry.path(), dir.str() + "/" + entry.path().filename().string());
  const nlohmann::json text = nlohmann::json::parse(std::ifstream(dir.str() + "/config.json"));
  const nlohmann::json config = {{"architectures", {"Gemma4ForConditionalGeneration"}},
                                 {"model_type", "gemma4"},
                                 {"text_config", text},
                                 {"vision_config", nullptr},
                                 {"audio_config", nullptr}};
  std::ofstream(dir.str() + "/config.json") << config.dump(2);
  const auto backend = folio::testing::make_test_backend(0, "f32");
  LoadedModel model = load_model(dir.str(), *backend);
  EXPECT_EQ(model.config.architecture, "gemma4");
  const Agreement a = folio::testing::compare_with_reference(*backend, model, ref, "transformers");
  EXPECT_EQ(a.decisive_agree, a.decisive);
  EXPECT_LE(a.max_logprob_diff, kMaxLogprobDiff);
}

// What folio does not run of Gemma 4, or a sharing no layer could serve, is
// refused with the reason.
TEST(FamilyModel, Gemma4ConfigsFolioCannotRunAreRefusedClearly) {
  struct Case {
    nlohmann::json change;
    std::string message;
  };
  const Case cases[] = {
      {{{"enable_moe_block", true}}, "Gemma 4's mixture-of-experts block (26B-A4B) is not supported yet"},
      {{{"num_kv_shared_layers", 5}}, "5 KV-shared layers of 5 leave no layer to write the cache"},
      {{{"num_kv_shared_layers", 3}}, "KV-shared layer 2 (global) has no earlier layer of its kind"},
  };
  const auto backend = folio::testing::make_test_backend(1, "f32");
  for (const Case& c : cases) {
    ScopedDir dir;
    for (const auto& entry : std::filesystem::directory_iterator(tiny_dir("gemma4")))
      std::filesystem::copy(entry.path(), dir.str() + "/" + entry.path().filename().string());
    nlohmann::json config = nlohmann::json::parse(std::ifstream(dir.str() + "/config.json"));
    config.update(c.change);
    std::ofstream(dir.str() + "/config.json") << config.dump(2);
    try {
      load_model(dir.str(), *backend);
      ADD_FAILURE() << "accepted " << c.change.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

// The engine on each family (rule 5): requests decoded together, in small
// prefill chunks, over a cached prefix, or preempted and recomputed give the
// tokens they give alone.
class FamilyEngineTest : public ::testing::TestWithParam<const char*> {};

// Eight prompts of 20 to 62 tokens; the 62-token one's three whole blocks
// are the prefix hit.
TEST_P(FamilyEngineTest, BatchingChunkingPrefixHitsAndPreemptionChangeNoGreedyOutput) {
  ModelSessionOptions o;
  o.backend = folio::testing::test_backend_options(2);
  o.model_path = tiny_dir(GetParam());
  folio::testing::expect_engine_invariance(open_model_session(o), folio::testing::InvarianceCase{});
}

// --max-model-len up to the context the rope scaling allows works; past it,
// or past a trained context nothing extends, is refused with the reason.
TEST(FamilyEngine, MaxModelLenBeyondTheScalingIsRefusedClearly) {
  ModelSessionOptions o;
  o.backend = folio::testing::test_backend_options(1);
  o.model_path = tiny_dir("smollm3");  // 64 trained tokens, YaRN x4
  const auto yarn = open_model_session(o);
  EngineConfig c;
  c.kv_num_blocks = 64;
  c.max_model_len = 256;
  EXPECT_EQ(Engine(yarn, c).max_model_len(), 256);
  c.max_model_len = 257;
  try {
    Engine engine(yarn, c);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-model-len 257 is beyond the 256 tokens model smollm3 supports (64 "
                                         "trained x yarn rope scaling factor 4); lower --max-model-len"),
              std::string::npos)
        << e.what();
  }
  o.model_path = tiny_dir("gemma2");  // 512 trained tokens, no scaling
  const auto plain = open_model_session(o);
  c.max_model_len = 1000;
  try {
    Engine engine(plain, c);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("beyond the 512 tokens model gemma2 supports (its trained length; its config "
                                         "has no rope scaling that extends it)"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, FamilyEngineTest,
                         ::testing::Values("gemma2", "phi3", "granite", "smollm3", "glm4", "ministral3", "mistral3",
                                           "olmo2", "granite4", "gemma4", "deepseek_v2", "deepseek_v3"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
}  // namespace folio
