// Device-side helpers of every CUDA kernel: activation loads and stores
// (f32 or bf16, chosen per tensor at run time), warp reductions whose order
// is fixed (every lane ends with the same bits), and the error report into
// the status word. The number conversions are number_formats.cuh's.
#pragma once

#include <cstdint>

#include "backend/cuda/kernel_args.h"
#include "backend/cuda/number_formats.cuh"

namespace folio::cuda {

// Activations: f32 or bf16, chosen per tensor at run time (ActKind).
__device__ __forceinline__ float load_act(const void* p, std::int64_t i, int kind) {
  if (kind == kActBf16) return bf16_bits_to_f32(static_cast<const std::uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
__device__ __forceinline__ void store_act(void* p, std::int64_t i, int kind, float v) {
  if (kind == kActBf16) {
    static_cast<std::uint16_t*>(p)[i] = f32_to_bf16_bits(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

// Sum over the 32 lanes by butterfly: each step adds a and b on one lane and
// b and a on its partner, equal bits, so every lane ends with the same total.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The first error a kernel finds (DeviceStatus in pinned, mapped host
// memory); later ones are dropped. The host reads it at the next sync.
__device__ __forceinline__ void report(DeviceStatus* status, int code, long long a, long long b, long long c) {
  if (atomicCAS(&status->code, 0, -1) == 0) {
    status->a = a;
    status->b = b;
    status->c = c;
    __threadfence_system();
    atomicExch(&status->code, code);
  }
}

}  // namespace folio::cuda
