#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"

namespace folio {

std::unique_ptr<Backend> make_backend(const std::string& name, int num_threads) {
  if (name == "reference") return std::make_unique<ReferenceBackend>();
  if (name == "cpu") return std::make_unique<CpuBackend>(num_threads);
  fail("unknown backend \"{}\" (reference and cpu are available)", name);
}

}  // namespace folio
