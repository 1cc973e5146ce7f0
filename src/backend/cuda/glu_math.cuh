// The glu kernel's activations that need more than one line, compiled for
// the device and the host so that tests/backend checks their arithmetic
// against the reference backend where no GPU is: gpt-oss's clamped SwiGLU,
// and the fold of an attention sink into an online softmax.
#pragma once

#include <math.h>

#include "backend/cuda/kernel_args.h"
#include "backend/cuda/number_formats.cuh"

namespace folio::cuda {

// backend.h's GluActivation, as the kernels take it (static_asserts in cuda_backend.cc).
enum GluKind : int { kGluSilu = 0, kGluGeluTanh = 1, kGluSwigluClamped = 2, kGluSigmoid = 3 };
inline constexpr float kSwigluAlpha = 1.702f;
inline constexpr float kSwigluLimit = 7.0f;

// g = min(g, limit), u = clamp(u, -limit, limit) + 1, g / (1 + e^(-alpha g)) * u:
// the reference's operations in its order.
__host__ __device__ __forceinline__ float swiglu_clamped(float g, float u) {
  g = fminf(g, kSwigluLimit);
  u = add_rn(fminf(fmaxf(u, -kSwigluLimit), kSwigluLimit), 1.0f);
  return mul_rn(div_rn(g, add_rn(1.0f, expf(mul_rn(-kSwigluAlpha, g)))), u);
}

// An attention sink joins an online softmax after the keys: the running max
// and sum take it in; the returned factor rescales the output accumulated
// so far (the sink weighs no value row).
__host__ __device__ __forceinline__ float fold_sink(float sink, float& running_max, float& running_sum) {
  const float new_max = fmaxf(running_max, sink);
  const float correction = expf(sub_rn(running_max, new_max));
  running_sum = add_rn(mul_rn(running_sum, correction), expf(sub_rn(sink, new_max)));
  running_max = new_max;
  return correction;
}

}  // namespace folio::cuda
