#include "backend/cuda/launch_check.h"

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace folio::cuda {

void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return;
  if (e == cudaErrorNoKernelImageForDevice)
    fail(
        "CUDA kernel {}: this build has no code for this GPU ({}); rebuild with its architecture in "
        "FOLIO_CUDA_GENCODE",
        kernel, cudaGetErrorString(e));
  fail("CUDA kernel {} failed to launch: {} ({})", kernel, cudaGetErrorString(e), cudaGetErrorName(e));
}

void check_grid(std::int64_t blocks, const char* kernel) {
  if (blocks > 0x7fffffff) fail("CUDA kernel {}: {} blocks exceed a grid's limit of 2^31 - 1", kernel, blocks);
}

void launch_failed(const char* what) { fail("CUDA backend: {}", what); }

}  // namespace folio::cuda
