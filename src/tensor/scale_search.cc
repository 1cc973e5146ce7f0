// ScaleSearch: try a handful of scales, let each pick its nearest codes, refit
// the scale (and offset) to those codes in closed form, keep the fit with the
// least weighted error, then re-pick codes for it until that stops helping.
#include "tensor/scale_search.h"

#include <cmath>
#include <limits>

namespace folio {
namespace {

// Where the starting scales put the largest element, in codes from zero, for
// a code range ending at `end`: a scale-only block tries kStarts points from
// a quarter of the range inside to half a code outside (clipping that element a
// little gives the many smaller ones finer steps). An affine block has its
// offset to place the smallest element too and does best with fine steps near
// the end, so it tries the codes kAffineOffsets around it.
constexpr int kStarts = 9;
float start_position(int end, int k) {
  const auto e = static_cast<float>(end);
  const float first = 0.75f * e - 0.5f;
  return first + (e + 0.5f - first) * static_cast<float>(k) / static_cast<float>(kStarts - 1);
}
constexpr float kAffineOffsets[] = {-1.5f, -1.0f, -0.75f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f};

// Rounds that re-pick codes for the best scale so far and refit: each can only
// lower the error (nearest codes are best for a fixed scale, the refit is best
// for fixed codes), and two catch nearly all of the gain.
constexpr int kRefineRounds = 2;

constexpr float kNoFit = std::numeric_limits<float>::infinity();

}  // namespace

ScaleFit fit_scale(const float* x, const float* w, int n, int lo, int hi) {
  float amax = 0.0f;
  float extreme = 0.0f;
  float wxx = 0.0f;
  float wsum = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      extreme = x[j];
    }
    wxx += w[j] * x[j] * x[j];
    wsum += w[j];
  }
  ScaleFit best;
  best.weight = wsum;
  if (amax == 0.0f) return best;  // every code 0, no error
  best.error = kNoFit;

  // Codes for 1 / iscale, then the scale that fits them best:
  // s = sum w x q / sum w q^2, leaving error sum w x^2 - s * sum w x q.
  auto consider = [&](float iscale) {
    if (!std::isfinite(iscale)) return;  // a scale too small for float: nothing to try
    float wqq = 0.0f;
    float wxq = 0.0f;
    for (int j = 0; j < n; ++j) {
      const auto q = static_cast<float>(nearest_code(x[j] * iscale, lo, hi));
      wqq += w[j] * q * q;
      wxq += w[j] * q * x[j];
    }
    // No weighted element got a nonzero code: any scale leaves the error sum w x^2.
    const float scale = wqq > 0.0f ? wxq / wqq : 1.0f / iscale;
    const float error = wqq > 0.0f ? wxx - scale * wxq : wxx;
    if (error < best.error) {
      best.scale = scale;
      best.error = error;
      best.weight_qq = wqq;
    }
  };

  // The largest element goes to the longer end of the code range (the scale
  // takes its sign); putting it on the shorter end only loses a code.
  const int end = -lo >= hi ? lo : hi;
  const float sign = end < 0 ? -1.0f : 1.0f;
  for (int k = 0; k < kStarts; ++k) consider(sign * start_position(std::abs(end), k) / extreme);
  for (int round = 0; round < kRefineRounds && best.scale != 0.0f; ++round) consider(1.0f / best.scale);
  if (best.error == kNoFit) {  // every start was out of float's range: all codes 0
    best.scale = 0.0f;
    best.error = wxx;
  }
  best.error = std::max(best.error, 0.0f);  // the closed form can dip below 0 by rounding
  return best;
}

ScaleFit fit_scale_offset(const float* x, const float* w, int n, int hi, bool offset_at_most_zero) {
  float min = x[0];
  float max = x[0];
  float wsum = 0.0f;
  float wx = 0.0f;
  float wxx = 0.0f;
  for (int j = 0; j < n; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
    wsum += w[j];
    wx += w[j] * x[j];
    wxx += w[j] * x[j] * x[j];
  }
  if (offset_at_most_zero) min = std::min(min, 0.0f);
  ScaleFit best;
  best.weight = wsum;
  best.offset = min;
  if (max == min) return best;  // every element is `min`: code 0 is exact
  best.error = kNoFit;

  // Codes for (iscale, offset), then the (scale, offset) that fit them best:
  // the 2x2 normal equations of sum w (x - s q - b)^2.
  auto consider = [&](float iscale, float offset) {
    if (!std::isfinite(iscale)) return;
    float wq = 0.0f;
    float wqq = 0.0f;
    float wxq = 0.0f;
    for (int j = 0; j < n; ++j) {
      const auto q = static_cast<float>(nearest_code((x[j] - offset) * iscale, 0, hi));
      wq += w[j] * q;
      wqq += w[j] * q * q;
      wxq += w[j] * q * x[j];
    }
    const float det = wsum * wqq - wq * wq;
    float s = 1.0f / iscale;
    float b = offset;
    if (det > 0.0f) {
      s = (wsum * wxq - wq * wx) / det;
      b = (wqq * wx - wq * wxq) / det;
    } else if (wsum > 0.0f) {
      b = (wx - s * wq) / wsum;  // one code over all the weight: only the offset can move
    }
    if (offset_at_most_zero && b > 0.0f) {  // the best offset is on the boundary then
      b = 0.0f;
      if (wqq > 0.0f) s = wxq / wqq;
    }
    if (!(s >= 0.0f)) return;
    const float error = wxx - 2.0f * s * wxq - 2.0f * b * wx + s * s * wqq + 2.0f * s * b * wq + b * b * wsum;
    if (error < best.error) {
      best.scale = s;
      best.offset = b;
      best.error = error;
      best.weight_qq = wqq;
    }
  };

  const float range = max - min;
  for (const float offset : kAffineOffsets) consider((static_cast<float>(hi) + offset) / range, min);
  for (int round = 0; round < kRefineRounds && best.scale > 0.0f; ++round) consider(1.0f / best.scale, best.offset);
  if (best.error == kNoFit) {  // no start was usable: all codes 0, the offset alone
    best.scale = 0.0f;
    best.offset = wsum > 0.0f ? wx / wsum : min;
    if (offset_at_most_zero) best.offset = std::min(best.offset, 0.0f);
    best.error = wxx - 2.0f * best.offset * wx + best.offset * best.offset * wsum;
  }
  best.error = std::max(best.error, 0.0f);
  return best;
}

}  // namespace folio
