#include "backend/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/reference/reference_backend.h"
#include "backend/sealed/sealed_backend.h"
#include "core/error.h"

namespace folio {
namespace {

MatmulPrecision parse_precision(const std::string& p) {
  if (p == "q8") return MatmulPrecision::kQ8;
  if (p == "f32") return MatmulPrecision::kF32;
  fail("unknown matmul precision \"{}\" (q8 and f32 are available)", p);
}

std::unique_ptr<Backend> make_cpu(const BackendOptions& o) {
  return std::make_unique<CpuBackend>(o.num_threads, o.cpu_level, parse_precision(o.precision));
}

}  // namespace

std::unique_ptr<Backend> make_backend(const BackendOptions& o) {
  if (o.name == "reference") return std::make_unique<ReferenceBackend>(o.activations);
  if (o.activations != DType::F32)
    fail("backend {} computes in f32 activations only; {} is the reference's (--backend reference)", o.name,
         name(o.activations));
  if (o.name == "cpu") return make_cpu(o);
  if (o.name == "sealed") return std::make_unique<SealedBackend>(make_cpu(o));
  fail("unknown backend \"{}\" (reference, cpu and sealed are available)", o.name);
}

std::vector<std::string> backend_names() { return {"reference", "cpu", "sealed"}; }

}  // namespace folio
