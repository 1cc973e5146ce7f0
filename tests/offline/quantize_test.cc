// Quantization end to end on SmolLM2: the KL divergence tool, calibration's
// activation statistics, and quantized files against each other.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "offline/awq.h"
#include "offline/calibration.h"
#include "offline/linalg.h"
#include "offline/perplexity.h"
#include "offline/quantizer.h"
#include "support/greedy_runner.h"
#include "support/llama_cpp_golden.h"
#include "support/temp_path.h"
#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

using folio::testing::TempPath;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* kText = "/usr/share/common-licenses/GPL-3";

std::shared_ptr<ModelSession> open(const std::string& path) {
  ModelSessionOptions o;
  o.model_path = path;
  o.backend = folio::testing::test_backend_options(0);
  return open_model_session(o);
}

void quantize_file(const std::string& in, const std::string& out, std::string_view type,
                   const ImportanceMatrix* importance = nullptr) {
  const GgufFile file = GgufFile::open(in);
  QuantizeOptions o;
  o.recipe = parse_quant_recipe(type).value();
  o.importance = importance;
  quantize_gguf(file, out, o);
}

// Calibration on the Apache-2.0 licence, held apart from the evaluated GPL-3.
CalibrationResult calibrate_on_apache(const std::string& model, std::int64_t ctx, std::int64_t chunks, bool covariances) {
  ModelSessionOptions o;
  o.model_path = model;
  o.backend = folio::testing::test_backend_options(0);
  PerplexityOptions windows;
  windows.ctx = ctx;
  windows.max_chunks = chunks;
  return calibrate(o, read_text("/usr/share/common-licenses/Apache-2.0"), windows, {}, covariances);
}

PerplexityOptions four_windows() {
  PerplexityOptions o;
  o.ctx = 256;
  o.max_chunks = 4;
  return o;
}

TEST(KlDivergence, OfAModelAgainstItselfIsZero) {
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  auto session = open(path);
  const auto tokens = session->tokenizer->encode(read_text(kText), true, false);
  const KlDivergenceResult r = compute_kl_divergence(*session, *session, tokens, four_windows());
  EXPECT_EQ(r.count, 4 * 127);
  EXPECT_EQ(r.kld_sum, 0.0);  // the same logits, bit for bit
  EXPECT_EQ(r.same_top, r.count);
  EXPECT_EQ(r.base.nll_sum, r.model.nll_sum);
  EXPECT_GT(r.model.perplexity(), 1.0);
}

// F16 (dequantized from the packaged weights) as the base: Q8_0 is close to
// it, Q4_0 further away, and both lie above zero.
TEST(KlDivergence, GrowsAsBitsShrink) {
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  TempPath f16, q8, q4;
  quantize_file(path, f16.str(), "f16");
  quantize_file(f16.str(), q8.str(), "q8_0");
  quantize_file(f16.str(), q4.str(), "q4_0");
  auto base = open(f16.str());
  const auto tokens = base->tokenizer->encode(read_text(kText), true, false);
  auto q8_session = open(q8.str());
  const KlDivergenceResult r8 = compute_kl_divergence(*base, *q8_session, tokens, four_windows());
  q8_session.reset();
  auto q4_session = open(q4.str());
  const KlDivergenceResult r4 = compute_kl_divergence(*base, *q4_session, tokens, four_windows());
  std::printf("SmolLM2 vs F16, 4 windows of 256: q8_0 mean KLD %.5f, same top %.1f%%; q4_0 %.5f, %.1f%%\n", r8.mean(),
              100 * r8.same_top_fraction(), r4.mean(), 100 * r4.same_top_fraction());
  EXPECT_GT(r8.mean(), 0.0);
  EXPECT_LT(r8.mean(), 0.02);
  EXPECT_GT(r4.mean(), 2 * r8.mean());
  EXPECT_GT(r8.same_top_fraction(), 0.9);
  EXPECT_GT(r8.same_top_fraction(), r4.same_top_fraction());
}

// Every matmul weight gets one positive, finite statistic per input column;
// weights that read the same input (Q, K, V; gate, up) get the same one.
TEST(Calibration, CollectsActivationStatisticsOfEveryMatmulWeight) {
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  const CalibrationResult r = calibrate_on_apache(path, 128, 2, /*covariances=*/false);
  EXPECT_EQ(r.windows, 2);
  EXPECT_GT(r.perplexity, 1.0);
  const auto& columns = r.importance.columns;
  EXPECT_EQ(columns.size(), 30u * 7 + 1);  // seven matmuls a layer and the tied output
  for (const auto& [name, values] : columns) {
    ASSERT_EQ(values.size(), name.find("ffn_down") != std::string::npos ? 1536u : 576u) << name;
    for (float v : values) ASSERT_TRUE(std::isfinite(v) && v > 0.0f) << name;
  }
  EXPECT_EQ(columns.at("blk.4.attn_q.weight"), columns.at("blk.4.attn_v.weight"));
  EXPECT_EQ(columns.at("blk.4.ffn_gate.weight"), columns.at("blk.4.ffn_up.weight"));
  EXPECT_NE(columns.at("blk.4.attn_q.weight"), columns.at("blk.5.attn_q.weight"));
  EXPECT_TRUE(columns.count("token_embd.weight"));  // the tied output projection
}

// With covariances, every 2-D matmul weight gets the second moments of its
// input, shared where the input is (Q, K, V; gate, up), whose diagonal is
// the importance statistic.
TEST(Calibration, CollectsInputCovariancesForGptq) {
  if (!linalg::available()) GTEST_SKIP() << "built without OpenBLAS";
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  const CalibrationResult r = calibrate_on_apache(path, 128, 2, /*covariances=*/true);
  const auto& h = r.importance.covariances;
  EXPECT_EQ(h.size(), 30u * 7 + 1);
  EXPECT_EQ(h.at("blk.4.attn_q.weight"), h.at("blk.4.attn_k.weight"));
  EXPECT_EQ(h.at("blk.4.attn_q.weight"), h.at("blk.4.attn_v.weight"));
  EXPECT_EQ(h.at("blk.4.ffn_gate.weight"), h.at("blk.4.ffn_up.weight"));
  EXPECT_NE(h.at("blk.4.ffn_up.weight"), h.at("blk.4.ffn_down.weight"));
  EXPECT_NE(h.at("blk.4.attn_q.weight"), h.at("blk.4.attn_output.weight"));
  EXPECT_NE(h.at("blk.4.attn_q.weight"), h.at("blk.5.attn_q.weight"));
  for (const auto& [name, cov] : h) {
    const std::vector<float>& mean = r.importance.columns.at(name);
    ASSERT_EQ(cov->cols, static_cast<std::int64_t>(mean.size())) << name;
    ASSERT_GT(cov->rows, 0) << name;
    for (std::size_t c = 0; c < mean.size(); ++c) {
      const float diagonal = cov->sum[c * mean.size() + c] / static_cast<float>(cov->rows);
      ASSERT_NEAR(diagonal, mean[c], 1e-3f * mean[c] + 1e-7f) << name << " column " << c;
    }
  }
}

// GPTQ end to end: SmolLM2 (its F16 base) to q4_0 calibrated on licence
// texts, against the block-by-block weighted encoder on the same statistics,
// evaluated on GPL-3, which neither saw. 1,024 calibration tokens are fewer
// than ffn_down's 1,536 inputs: those tensors are left to the block encoder,
// byte for byte what it writes without GPTQ.
TEST(Gptq, QuantizesAModelWithLessDivergenceThanTheBlockEncoder) {
  if (!linalg::available()) GTEST_SKIP() << "built without OpenBLAS";
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  TempPath f16, imatrix, gptq;
  quantize_file(path, f16.str(), "f16");
  const CalibrationResult calibration = calibrate_on_apache(f16.str(), 256, 4, /*covariances=*/true);
  const GgufFile file = GgufFile::open(f16.str());
  QuantizeOptions q;
  q.recipe = parse_quant_recipe("q4_0").value();
  q.importance = &calibration.importance;
  const QuantizeSummary block_summary = quantize_gguf(file, imatrix.str(), q);
  EXPECT_EQ(block_summary.gptq, 0);
  q.method = QuantMethod::kGptq;
  const QuantizeSummary gptq_summary = quantize_gguf(file, gptq.str(), q);
  // Every layer's matmuls but ffn_down; the tied embedding stays block by block.
  EXPECT_EQ(gptq_summary.gptq, 30 * 6);
  EXPECT_EQ(gptq_summary.gptq_short, 30);
  EXPECT_EQ(gptq_summary.gptq_short_example, "blk.0.ffn_down.weight");
  EXPECT_EQ(gptq_summary.gptq_short_rows, 1024);
  EXPECT_EQ(gptq_summary.gptq_short_cols, 1536);
  EXPECT_EQ(gptq_summary.output_bytes, block_summary.output_bytes);
  const GgufFile by_blocks = GgufFile::open(imatrix.str()), by_gptq = GgufFile::open(gptq.str());
  for (const char* name : {"blk.7.ffn_down.weight", "blk.7.ffn_up.weight"}) {
    const GgufTensorInfo* a = by_blocks.find_tensor(name);
    const GgufTensorInfo* b = by_gptq.find_tensor(name);
    ASSERT_TRUE(a != nullptr && b != nullptr && a->size_bytes == b->size_bytes) << name;
    const bool same = std::memcmp(a->data, b->data, a->size_bytes) == 0;
    EXPECT_EQ(same, std::string_view(name).find("ffn_down") != std::string_view::npos) << name;
  }

  auto base = open(f16.str());
  const auto tokens = base->tokenizer->encode(read_text(kText), true, false);
  auto session = open(imatrix.str());
  const KlDivergenceResult blocks = compute_kl_divergence(*base, *session, tokens, four_windows());
  session = open(gptq.str());
  const KlDivergenceResult ours = compute_kl_divergence(*base, *session, tokens, four_windows());
  std::printf("SmolLM2 q4_0 vs F16, 4 windows of 256: block by block mean KLD %.5f, GPTQ %.5f\n", blocks.mean(),
              ours.mean());
  EXPECT_LT(ours.mean(), blocks.mean());
}

// AWQ's folding leaves the model's function as it was: random channel
// scales on every group of SmolLM2, written as F32 (no rounding to speak
// of), give the F16 base's logits again.
TEST(Awq, FoldedScalesLeaveTheModelAsItWas) {
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  TempPath f16, scaled;
  quantize_file(path, f16.str(), "f16");
  AwqScales awq;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> factor(0.25f, 4.0f);
  auto random_scales = [&](std::size_t n) {
    std::vector<float> s(n);
    for (float& v : s) v = factor(rng);
    return s;
  };
  auto inverse = [](std::vector<float> s) {
    for (float& v : s) v = 1.0f / v;
    return s;
  };
  for (int l = 0; l < 30; ++l) {
    const std::string blk = fmt::format("blk.{}.", l);
    const std::vector<float> attn = random_scales(576), ffn = random_scales(576), down = random_scales(1536);
    for (const char* m : {"attn_q", "attn_k", "attn_v"}) awq.columns[blk + m + ".weight"] = attn;
    awq.rows[blk + "attn_norm.weight"] = inverse(attn);
    for (const char* m : {"ffn_gate", "ffn_up"}) awq.columns[blk + m + ".weight"] = ffn;
    awq.rows[blk + "ffn_norm.weight"] = inverse(ffn);
    awq.columns[blk + "ffn_down.weight"] = down;
    awq.rows[blk + "ffn_up.weight"] = inverse(down);
  }
  const GgufFile file = GgufFile::open(f16.str());
  QuantizeOptions q;
  q.recipe = parse_quant_recipe("f32").value();
  q.awq = &awq;
  EXPECT_EQ(quantize_gguf(file, scaled.str(), q).awq_scaled, 30 * 8);
  auto base = open(f16.str());
  auto model = open(scaled.str());
  const auto tokens = base->tokenizer->encode(read_text(kText), true, false);
  PerplexityOptions one;
  one.ctx = 256;
  one.max_chunks = 1;
  const KlDivergenceResult r = compute_kl_divergence(*base, *model, tokens, one);
  EXPECT_LT(r.mean(), 1e-5);
  EXPECT_EQ(r.same_top, r.count);
}

// AWQ's search on SmolLM2 for q4_0: every group of every layer is searched,
// none ends worse on the calibration inputs than unscaled, and some scale.
TEST(Awq, SearchesEveryGroupAndNeverEndsWorse) {
  if (!linalg::available()) GTEST_SKIP() << "built without OpenBLAS";
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  const CalibrationResult calibration = calibrate_on_apache(path, 128, 2, /*covariances=*/true);
  const GgufFile file = GgufFile::open(path);
  QuantizeOptions q;
  q.recipe = parse_quant_recipe("q4_0").value();
  ThreadPool pool(2);
  const AwqScales awq = search_awq_scales(file, plan_quantization(file, q.recipe, q.overrides), calibration.importance, pool);
  ASSERT_EQ(awq.groups.size(), 30u * 3);
  int scaled = 0;
  for (const AwqGroup& g : awq.groups) {
    EXPECT_LE(g.error, g.unscaled) << g.input;
    EXPECT_GT(g.unscaled, 0.0) << g.input;
    scaled += g.alpha > 0.0;
  }
  EXPECT_GT(scaled, 0);
  EXPECT_EQ(awq.rows.size(), static_cast<std::size_t>(scaled));
}

// FNV-1a over a file's little-endian 64-bit words, the last one zero-padded
// (scripts/make_quantize_goldens.py computes the same).
std::string fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  bytes.resize((bytes.size() + 7) / 8 * 8, 0);
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (std::size_t i = 0; i < bytes.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = (h ^ word) * 0x100000001B3ull;
  }
  return fmt::format("{:016x}", h);
}

// llama.cpp's top-1/top-2 margin above which folio must pick its token (as
// in reference_model_test.cc: below it the two are at a near-tie).
constexpr double kDecisiveMargin = 0.75;

// Files folio writes load in llama.cpp (golden from
// scripts/make_quantize_goldens.py): folio quantizes the packaged model to
// F16 and then to each type, byte for byte the files llama.cpp read, and then
// follows llama.cpp's greedy continuations on them.
TEST(QuantizeReference, LlamaCppReadsWhatFolioWrites) {
  std::ifstream golden_file(folio::testing::source_path("tests/data/reference/quantize.json"));
  ASSERT_TRUE(golden_file.good()) << "run scripts/make_quantize_goldens.py";
  const nlohmann::json golden = nlohmann::json::parse(golden_file);
  for (const auto& [name, entry] : golden["models"].items()) {
    FOLIO_REQUIRE_MODEL(path, entry["model"].get<std::string>());
    TempPath base;
    quantize_file(path, base.str(), "f16");
    ASSERT_EQ(fnv1a64(base.str()), entry["base_fnv1a64"].get<std::string>())
        << "folio's F16 file changed; if on purpose, run scripts/make_quantize_goldens.py";
    for (const auto& [type, want] : entry["types"].items()) {
      TempPath out;
      quantize_file(base.str(), out.str(), type);
      ASSERT_EQ(fnv1a64(out.str()), want["fnv1a64"].get<std::string>())
          << type << ": folio's file changed; if on purpose, run scripts/make_quantize_goldens.py";
      const auto owned_backend = folio::testing::make_test_backend(0, "q8");
      Backend& backend = *owned_backend;
      LoadedModel model = load_model(out.str(), backend);
      folio::testing::GreedyRunner runner(backend, model, 128, 20, DType::F16);
      const auto cases = folio::testing::llama_cpp_continuations(entry["token_ids"], want["llama_cpp"]);
      const folio::testing::TrajectoryAgreement a = folio::testing::follow_llama_cpp(runner, cases, kDecisiveMargin);
      // Free-running greedy continuations, all prompts in one batch.
      std::vector<std::vector<TokenId>> prompts;
      for (const auto& c : cases) prompts.push_back(c.prompt);
      const auto ours = runner.greedy(prompts, 64, {});
      int equal = 0;
      std::vector<std::size_t> common;  // tokens before the first difference, per prompt
      for (std::size_t p = 0; p < cases.size(); ++p) {
        const auto& theirs = cases[p].tokens;
        const std::size_t n = std::min(theirs.size(), ours[p].size());
        std::size_t k = 0;
        while (k < n && theirs[k] == ours[p][k]) ++k;
        common.push_back(k);
        equal += k == n ? 1 : 0;
      }
      std::sort(common.begin(), common.end());
      std::printf("[%s %s] next token equal to llama.cpp's at %d/%d steps, at %d/%d decisive ones; whole greedy "
                  "runs equal: %d/%zu; equal tokens before the first difference: min %zu, median %zu\n",
                  name.c_str(), type.c_str(), a.agree, a.steps, a.decisive_agree, a.decisive, equal, cases.size(),
                  common.front(), common[common.size() / 2]);
      EXPECT_EQ(a.decisive_agree, a.decisive) << type;
      EXPECT_GE(a.agree * 100, a.steps * 95) << type;
    }
  }
}

}  // namespace
}  // namespace folio
