// Where tests find the real model files of the models cache
// (scripts/fetch_models.py fills it; FOLIO_MODELS overrides its place).
#pragma once

#include <string>

namespace folio::testing {

// The models cache directory.
std::string models_dir();

// Full path of a model file in the cache. When the file is missing the
// calling test fails with the command that fetches it, unless
// FOLIO_ALLOW_MISSING_MODELS=1, when it is skipped.
std::string model_path(const std::string& file);

inline const char* kSmolLM2 = "smollm2-135m-instruct-q4_1.gguf";
inline const char* kQwen05B = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
inline const char* kQwen15B = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
inline const char* kGemma3 = "gemma-3-270m-q4_k_m.gguf";

// Path of a file in the source tree, e.g. "tests/data/x".
std::string source_path(const std::string& relative);

}  // namespace folio::testing

// Use at the top of a test: binds `path` or ends the test (fail or skip).
#define FOLIO_REQUIRE_MODEL(path, file)                                                   \
  const std::string path = ::folio::testing::model_path(file);                             \
  if (path.empty()) {                                                                      \
    if (std::getenv("FOLIO_ALLOW_MISSING_MODELS") != nullptr) GTEST_SKIP() << file << " missing"; \
    FAIL() << file << " is not in " << ::folio::testing::models_dir()                      \
           << "; run: python3 scripts/fetch_models.py --all";                              \
  }
