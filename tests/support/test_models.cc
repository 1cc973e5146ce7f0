#include "support/test_models.h"

#include <cstdlib>
#include <filesystem>

namespace folio::testing {

std::string models_dir() {
  if (const char* env = std::getenv("FOLIO_MODELS")) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/folio/models";
}

std::string model_path(const std::string& file) {
  std::string path = models_dir() + "/" + file;
  return std::filesystem::exists(path) ? path : std::string();
}

// FOLIO_SOURCE_DIR in the environment wins over the tree the binary was
// built from: binaries built here run on the GPU machine, in another tree.
std::string source_path(const std::string& relative) {
  const char* env = std::getenv("FOLIO_SOURCE_DIR");
  return std::string(env != nullptr && *env != '\0' ? env : FOLIO_SOURCE_DIR) + "/" + relative;
}

}  // namespace folio::testing
