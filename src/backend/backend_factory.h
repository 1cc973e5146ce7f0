// make_backend: the one place every backend is built, by name and options.
// "reference" (scalar, single-threaded, written to be obviously right; its
// activations f32, f16 or bf16), "cpu" (threaded SIMD) and "sealed" (the cpu
// backend behind memory the host cannot read: a check, in tests and from the
// command line, that nothing outside the backend reads device memory).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace folio {

struct BackendOptions {
  std::string name = "cpu";        // reference, cpu or sealed
  int num_threads = 0;             // cpu, sealed: 0 = one per hardware thread
  std::string cpu_level;           // cpu, sealed: cap on the SIMD level (avx512_vnni, avx512, avx2, scalar)
  std::string precision = "q8";    // cpu, sealed: matmul activations, q8 (fast) or f32 (accurate)
  DType activations = DType::F32;  // reference: F32, F16 or BF16
};

std::unique_ptr<Backend> make_backend(const BackendOptions& options);

// The names make_backend takes.
std::vector<std::string> backend_names();

}  // namespace folio
