// make_backend: the one place every backend is built, by name and options.
// "reference" (scalar, single-threaded, written to be obviously right; its
// activations f32, f16 or bf16), "cpu" (threaded SIMD), "sealed" (the cpu
// backend behind memory the host cannot read: a check, in tests and from the
// command line, that nothing outside the backend reads device memory),
// "deferred" (the sealed backend's calls run later, on a worker thread, in
// stream order: a check that the host never rewrites what a queued copy
// still reads) and, in a build with FOLIO_CUDA, "cuda" (one NVIDIA GPU; its
// activations f32 or bf16).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace folio {

struct BackendOptions {
  std::string name = "cpu";        // reference, cpu, sealed, deferred or cuda
  int num_threads = 0;             // cpu, sealed, deferred: 0 = one per hardware thread
  std::string cpu_level;           // cpu, sealed, deferred: cap on the SIMD level (avx512_vnni, avx512, avx2, scalar)
  std::string precision = "q8";    // cpu, sealed, deferred: matmul activations, q8 (fast) or f32 (accurate)
  DType activations = DType::F32;  // reference: F32, F16 or BF16; cuda: F32 or BF16
  // cuda: one matmul kernel for every batch size, so that a row's bits never
  // depend on its batch (docs/architecture.md rule 9). false: products of more than 8
  // rows go through cuBLAS (faster prefill; a row's bits then depend on the
  // batch, and greedy outputs alone and batched may differ).
  bool batch_invariant = true;
};

std::unique_ptr<Backend> make_backend(const BackendOptions& options);

// The names make_backend takes in this build ("cuda" only where it was built).
std::vector<std::string> backend_names();

// Why make_backend cannot build `name` on this machine (the build lacks it,
// or its device is missing), or empty when it can.
std::string backend_unavailable(const std::string& name);

}  // namespace folio
