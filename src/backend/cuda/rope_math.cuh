// The rope kernel's work item, compiled for the device and the host: one
// rotated pair of one head of one token and, with a query temperature, the
// unrotated dimensions of the head that fall to that pair (dim + i,
// dim + i + half, ...), so that tests/backend checks the kernel's arithmetic
// and its coverage of the head against the reference backend where no GPU is.
#pragma once

#include <math.h>

#include <cstdint>

#include "backend/cuda/kernel_args.h"
#include "backend/cuda/number_formats.cuh"

namespace folio::cuda {

// The query temperature at `pos`: 1 + beta * ln(1 + floor((pos + offset) / length)).
__host__ __device__ __forceinline__ float rope_temperature(const RopeTemperature& t, float pos) {
  return add_rn(1.0f, mul_rn(t.beta, logf(add_rn(1.0f, floorf(div_rn(add_rn(pos, t.offset), t.length))))));
}

// Pair i of one head at position pos; `head` reads and writes the head's
// numbers: head.load(d) and head.store(d, value).
template <typename Head>
__host__ __device__ __forceinline__ void rope_pair(Head& head, float pos, float inv_freq, std::int64_t i, int dim,
                                                   std::int64_t head_dim, bool neox, float factor,
                                                   const RopeTemperature& temperature) {
  const std::int64_t half = dim / 2;
  const float theta = mul_rn(pos, inv_freq);
  float c = mul_rn(cosf(theta), factor);
  float s = mul_rn(sinf(theta), factor);
  if (temperature.beta != 0.0f) {
    const float t = rope_temperature(temperature, pos);
    c = mul_rn(c, t);
    s = mul_rn(s, t);
    for (std::int64_t d = dim + i; d < head_dim; d += half) head.store(d, mul_rn(head.load(d), t));
  }
  const std::int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
  const float x0 = head.load(a), x1 = head.load(b);
  head.store(a, sub_rn(mul_rn(x0, c), mul_rn(x1, s)));
  head.store(b, add_rn(mul_rn(x0, s), mul_rn(x1, c)));
}

}  // namespace folio::cuda
