#include "support/test_backend.h"

#include <cstdlib>

#include "core/error.h"
#include "support/test_models.h"

namespace folio::testing {

BackendOptions test_backend_options(int threads, const std::string& precision) {
  BackendOptions o;
  if (const char* name = std::getenv("FOLIO_TEST_BACKEND"); name != nullptr && *name != '\0') o.name = name;
  o.num_threads = threads;
  o.precision = precision;
  // FOLIO_TEST_ACTIVATIONS=bf16 (or f16 on the reference) runs a backend in
  // that activation type.
  if (const char* act = std::getenv("FOLIO_TEST_ACTIVATIONS"); act != nullptr && *act != '\0') {
    const auto type = parse_dtype(act);
    if (!type) fail("FOLIO_TEST_ACTIVATIONS={} is not a number type (f32, f16 or bf16)", act);
    o.activations = *type;
  }
  return o;
}

std::unique_ptr<Backend> make_test_backend(int threads, const std::string& precision) {
  return make_backend(test_backend_options(threads, precision));
}

std::shared_ptr<ModelSession> open_test_session(const std::string& file, int threads) {
  const std::string path = model_path(file);
  if (path.empty()) return nullptr;
  ModelSessionOptions o;
  o.model_path = path;
  o.backend = test_backend_options(threads);
  return open_model_session(o);
}

}  // namespace folio::testing
