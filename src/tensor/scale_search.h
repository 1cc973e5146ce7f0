// ScaleSearch: the weighted least-squares fit of one block's scale (and
// offset) to integer codes that every importance-aware encoder shares. A fit
// only ever accepts a candidate that lowers the weighted error it measures.
#pragma once

#include <algorithm>

namespace folio {

// One block's fit: x[j] ~ scale * q[j] + offset, where q[j] are the codes the
// scale picks (nearest_code of (x[j] - offset) / scale).
struct ScaleFit {
  float scale = 0.0f;
  float offset = 0.0f;
  float error = 0.0f;      // sum_j w[j] * (x[j] - scale * q[j] - offset)^2
  float weight_qq = 0.0f;  // sum_j w[j] * q[j]^2: how fast the error grows as the scale moves
  float weight = 0.0f;     // sum_j w[j]: how fast it grows as the offset moves
};

// The code in [lo, hi] nearest to v, halves up. v must not be NaN; any other
// float (infinities too) saturates.
inline int nearest_code(float v, int lo, int hi) {
  v = std::min(std::max(v, static_cast<float>(lo)), static_cast<float>(hi));
  // v - lo >= 0, so truncation is floor.
  return static_cast<int>(v - static_cast<float>(lo) + 0.5f) + lo;
}

// x[j] ~ scale * q[j], q[j] in [lo, hi] with lo <= 0 < hi (a signed or an
// unsigned code range); the scale may take either sign. Minimises
// sum_j w[j] * (x[j] - scale * q[j])^2 over scales near those that put the
// largest |x[j]| on the longer end of the code range, then refines. n elements,
// finite x, w >= 0 (all-zero w is allowed: any scale is then as good).
ScaleFit fit_scale(const float* x, const float* w, int n, int lo, int hi);

// x[j] ~ scale * q[j] + offset, q[j] in [0, hi], scale >= 0. With
// offset_at_most_zero the offset is kept <= 0 (K-quants store -dmin * m with
// unsigned m); otherwise it is free. Same contract as fit_scale otherwise.
ScaleFit fit_scale_offset(const float* x, const float* w, int n, int hi, bool offset_at_most_zero);

}  // namespace folio
