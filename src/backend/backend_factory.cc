#include "backend/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/deferred/deferred_backend.h"
#include "backend/reference/reference_backend.h"
#include "backend/sealed/sealed_backend.h"
#include "core/error.h"

#if FOLIO_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

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
  if (o.name == "cuda") {
#if FOLIO_CUDA
    return std::make_unique<CudaBackend>(o.activations, o.batch_invariant);
#else
    fail(
        "this folio was built without the CUDA backend (FOLIO_CUDA=OFF: CMake found no nvcc); use --backend cpu, "
        "or rebuild with the CUDA toolkit installed");
#endif
  }
  if (o.activations != DType::F32)
    fail("backend {} computes in f32 activations only; {} is the reference's (--backend reference)", o.name,
         name(o.activations));
  if (o.name == "cpu") return make_cpu(o);
  if (o.name == "sealed") return std::make_unique<SealedBackend>(make_cpu(o));
  if (o.name == "deferred") return std::make_unique<DeferredBackend>(std::make_unique<SealedBackend>(make_cpu(o)));
  std::string names;
  for (const std::string& n : backend_names()) names += (names.empty() ? "" : ", ") + n;
  fail("unknown backend \"{}\" ({} are available)", o.name, names);
}

std::vector<std::string> backend_names() {
#if FOLIO_CUDA
  return {"reference", "cpu", "sealed", "deferred", "cuda"};
#else
  return {"reference", "cpu", "sealed", "deferred"};
#endif
}

std::string backend_unavailable(const std::string& name) {
  if (name != "cuda") return {};
#if FOLIO_CUDA
  return cuda_device_problem();
#else
  return "this folio was built without the CUDA backend (FOLIO_CUDA=OFF)";
#endif
}

}  // namespace folio
