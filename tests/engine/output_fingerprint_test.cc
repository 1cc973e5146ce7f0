// The system fingerprint: equal for replicas that give equal bits (another
// thread count, the same file opened twice), different for whatever changes
// them (the SIMD level, the matmul precision, the KV cache type, the model,
// the chat template), and shaped as OpenAI's ("fp_" and 16 hex digits).
#include "engine/output_fingerprint.h"

#include <gtest/gtest.h>

#include <regex>

#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

std::shared_ptr<ModelSession> open_session(const char* file, int threads, const std::string& precision = "q8",
                                           const std::string& level = "") {
  const std::string path = testing::model_path(file);
  if (path.empty()) return nullptr;
  ModelSessionOptions o;
  o.model_path = path;
  o.backend = testing::test_backend_options(threads, precision);
  o.backend.cpu_level = level;
  return open_model_session(o);
}

TEST(OutputFingerprintTest, EqualForEqualBitsAndDifferentForWhatChangesThem) {
  FOLIO_REQUIRE_MODEL(path, testing::kSmolLM2);
  FOLIO_REQUIRE_MODEL(other, testing::kGemma3);
  const EngineConfig config;
  auto two_threads = open_session(testing::kSmolLM2, 2);
  const std::string template_text = two_threads->chat_template->source();
  const OutputFingerprint f = output_fingerprint(*two_threads, config, template_text);
  EXPECT_TRUE(std::regex_match(f.id, std::regex("fp_[0-9a-f]{16}"))) << f.id;
  EXPECT_NE(f.description.find(two_threads->backend->numerics()), std::string::npos) << f.description;

  // A replica: the same file on another thread count.
  EXPECT_EQ(output_fingerprint(*open_session(testing::kSmolLM2, 1), config, template_text).id, f.id);

  EngineConfig q8_kv = config;
  q8_kv.kv_dtype = KvCacheDType(KvDType::kQ8_0);
  EXPECT_NE(output_fingerprint(*two_threads, q8_kv, template_text).id, f.id);
  EngineConfig blocks = config;
  blocks.block_size = 32;
  EXPECT_NE(output_fingerprint(*two_threads, blocks, template_text).id, f.id);
  EXPECT_NE(output_fingerprint(*two_threads, config, template_text + " ").id, f.id);
  EXPECT_NE(output_fingerprint(*open_session(testing::kGemma3, 2), config, template_text).id, f.id);
  if (two_threads->backend->name() == "cpu") {
    EXPECT_NE(output_fingerprint(*open_session(testing::kSmolLM2, 2, "f32"), config, template_text).id, f.id);
    auto scalar = open_session(testing::kSmolLM2, 2, "q8", "scalar");
    EXPECT_EQ(scalar->backend->numerics(), "cpu scalar q8");
    EXPECT_NE(output_fingerprint(*scalar, config, template_text).id, f.id);
  }
}

}  // namespace
}  // namespace folio
