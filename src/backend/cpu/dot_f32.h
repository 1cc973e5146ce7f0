// Dot products of f32 rows for the f32-activation matmul path. Each output is
// one accumulator chain over the row in a fixed order, so its value depends
// only on its two input rows, never on how many rows or tokens share a call.
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_features.h"

namespace folio {

// For r < num_rows (at most kMaxDotRows) and t < num_tokens:
//   y[t * y_stride + r] = dot(w + r * k, x + t * k, k)
using RowsDotF32 = void (*)(const float* w, int num_rows, const float* x, std::int64_t num_tokens, std::int64_t k,
                            float* y, std::int64_t y_stride);

inline constexpr int kMaxDotRows = 8;

RowsDotF32 select_rows_dot_f32(const CpuFeatures& features);

}  // namespace folio
