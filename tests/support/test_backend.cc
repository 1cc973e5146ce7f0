#include "support/test_backend.h"

#include <cstdlib>

namespace folio::testing {

BackendOptions test_backend_options(int threads, const std::string& precision) {
  BackendOptions o;
  if (const char* name = std::getenv("FOLIO_TEST_BACKEND"); name != nullptr && *name != '\0') o.name = name;
  o.num_threads = threads;
  o.precision = precision;
  return o;
}

std::unique_ptr<Backend> make_test_backend(int threads, const std::string& precision) {
  return make_backend(test_backend_options(threads, precision));
}

}  // namespace folio::testing
