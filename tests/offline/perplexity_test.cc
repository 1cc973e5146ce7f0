// folio perplexity against llama.cpp's on the same text, windows and models
// (goldens from scripts/make_perplexity_goldens.py): within 1%.
#include "offline/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

TEST(Perplexity, WithinOnePercentOfLlamaCpp) {
  std::ifstream in(folio::testing::source_path("tests/data/reference/perplexity.json"));
  ASSERT_TRUE(in.good());
  const nlohmann::json golden = nlohmann::json::parse(in);
  std::ifstream text_file(golden["text"].get<std::string>());
  ASSERT_TRUE(text_file.good()) << golden["text"];
  std::stringstream text;
  text << text_file.rdbuf();
  for (const auto& c : golden["cases"]) {
    FOLIO_REQUIRE_MODEL(path, c["model"].get<std::string>());
    ModelSessionOptions o;
    o.model_path = path;
    o.backend = folio::testing::test_backend_options(0);
    auto session = open_model_session(o);
    std::vector<TokenId> tokens = session->tokenizer->encode(text.str(), true, false);
    ASSERT_EQ(static_cast<std::int64_t>(tokens.size()), c["num_tokens"].get<std::int64_t>()) << "tokenization differs";
    PerplexityOptions options;
    options.ctx = c["ctx"];
    options.max_chunks = c["chunks"];
    PerplexityResult r = compute_perplexity(*session, tokens, options);
    const double want = c["perplexity"];
    std::printf("[%s] ctx %lld, %lld chunks: folio PPL %.4f, llama.cpp %.4f (%+.2f%%)\n",
                c["model"].get<std::string>().c_str(), static_cast<long long>(options.ctx),
                static_cast<long long>(r.num_chunks), r.perplexity(), want, 100.0 * (r.perplexity() / want - 1));
    EXPECT_EQ(r.num_chunks, c["chunks"].get<std::int64_t>());
    EXPECT_LT(std::fabs(r.perplexity() / want - 1), 0.01);
  }
}

// Quantized KV against f16 KV on the golden's SmolLM2 windows: q8_0 within
// 1% and fp8_e4m3 within 2% (over all 29 windows of the text, q8_0 moves it
// by +0.2% and fp8_e4m3 by +1.3%; 8 windows are noisier).
TEST(Perplexity, QuantizedKvStaysCloseToF16) {
  std::ifstream in(folio::testing::source_path("tests/data/reference/perplexity.json"));
  ASSERT_TRUE(in.good());
  const nlohmann::json golden = nlohmann::json::parse(in);
  const nlohmann::json& c = golden["cases"][0];
  ASSERT_EQ(c["model"].get<std::string>(), folio::testing::kSmolLM2);
  std::ifstream text_file(golden["text"].get<std::string>());
  ASSERT_TRUE(text_file.good()) << golden["text"];
  std::stringstream text;
  text << text_file.rdbuf();
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  ModelSessionOptions o;
  o.model_path = path;
  o.backend = folio::testing::test_backend_options(0);
  auto session = open_model_session(o);
  std::vector<TokenId> tokens = session->tokenizer->encode(text.str(), true, false);
  auto ppl = [&](KvCacheDType type) {
    PerplexityOptions options;
    options.ctx = c["ctx"];
    options.max_chunks = c["chunks"];
    options.kv_dtype = type;
    return compute_perplexity(*session, tokens, options).perplexity();
  };
  const double f16 = ppl(KvDType::kF16);
  const double q8 = ppl(KvDType::kQ8_0);
  const double fp8 = ppl(KvDType::kFp8E4M3);
  std::printf("SmolLM2 PPL, %d windows of %d: f16 KV %.4f, q8_0 %.4f (%+.2f%%), fp8_e4m3 %.4f (%+.2f%%)\n",
              c["chunks"].get<int>(), c["ctx"].get<int>(), f16, q8, 100 * (q8 / f16 - 1), fp8, 100 * (fp8 / f16 - 1));
  EXPECT_LT(std::fabs(q8 / f16 - 1), 0.01);
  EXPECT_LT(std::fabs(fp8 / f16 - 1), 0.02);
}

TEST(Perplexity, RefusesTextShorterThanTwoWindows) {
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  ModelSessionOptions o;
  o.model_path = path;
  o.backend = folio::testing::test_backend_options(0);
  auto session = open_model_session(o);
  std::vector<TokenId> tokens(300, 42);
  PerplexityOptions options;
  options.ctx = 256;
  try {
    compute_perplexity(*session, tokens, options);
    FAIL() << "300 tokens cannot make two windows of 256";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace folio
