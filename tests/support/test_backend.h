// The backend the model-level tests (tests/engine) run on: FOLIO_TEST_BACKEND
// names it (cpu by default; CTest runs the engine tests a second time on
// "sealed", whose memory the host cannot read, which proves that nothing
// outside the backend reads device memory, and a third time on "deferred",
// whose calls run later on a worker thread, which proves that the host does
// not rewrite what a queued copy still reads; FOLIO_TEST_BACKEND=cuda runs
// them on the GPU, FOLIO_TEST_ACTIVATIONS=bf16 in bf16 activations).
#pragma once

#include <memory>
#include <string>

#include "backend/backend_factory.h"
#include "engine/model_session.h"

namespace folio::testing {

BackendOptions test_backend_options(int threads = 2, const std::string& precision = "q8");
std::unique_ptr<Backend> make_test_backend(int threads = 2, const std::string& precision = "q8");

// A session of a model of the models cache on the test backend; null when
// the file is missing (FOLIO_REQUIRE_MODEL then ends the test).
std::shared_ptr<ModelSession> open_test_session(const std::string& file, int threads = 2);

}  // namespace folio::testing
