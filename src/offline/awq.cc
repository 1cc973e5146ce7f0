#include "offline/awq.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "core/error.h"
#include "offline/linalg.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

using Index = std::size_t;

// The exponents tried; 0 is no scaling.
constexpr double kAlphas[] = {0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0};
// Rows of each matrix the search measures, evenly spaced: enough for a
// stable choice of one number per group.
constexpr std::int64_t kSearchRows = 256;

struct Matrix {
  const GgufTensorInfo* tensor;
  const TensorQuantPlan* plan;
};

// s_c = rms_c^alpha, normalised so that max(s) * min(s) = 1.
std::vector<float> channel_scales(const std::vector<float>& mean_squares, double alpha) {
  std::vector<float> s(mean_squares.size());
  double lo = INFINITY, hi = 0.0;
  for (Index c = 0; c < s.size(); ++c) {
    const double v = std::pow(std::max(static_cast<double>(mean_squares[c]), 1e-12), alpha / 2.0);
    s[c] = static_cast<float>(v);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double norm = std::sqrt(lo * hi);
  for (float& v : s) v = static_cast<float>(v / norm);
  return s;
}

// The importance the encoder weighs a scaled matrix's columns by: the
// scaled input's mean squares.
std::vector<float> scaled_importance(const std::vector<float>& mean_squares, const std::vector<float>& s) {
  std::vector<float> out(mean_squares.size());
  for (Index c = 0; c < out.size(); ++c) out[c] = mean_squares[c] / (s[c] * s[c]);
  return out;
}

// sum over sampled rows of |(decoded / s - w) x|^2 over the calibration x.
double output_error(const Matrix& m, const std::vector<float>& s, const std::vector<float>& importance,
                    const std::vector<float>& h, ThreadPool& pool) {
  const std::int64_t cols = m.tensor->shape[0], rows = m.tensor->rows();
  const std::int64_t sampled = std::min(rows, kSearchRows);
  const Index in_row = static_cast<Index>(row_bytes(m.plan->from, cols));
  const Index out_row = static_cast<Index>(row_bytes(m.plan->to, cols));
  std::vector<float> d(static_cast<Index>(sampled) * static_cast<Index>(cols));
  pool.parallel_for(sampled, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> w(static_cast<Index>(cols)), y(w.size());
    std::vector<std::uint8_t> q(out_row);
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t r = i * rows / sampled;
      dequantize_row(m.plan->from, m.tensor->data + static_cast<Index>(r) * in_row, w.data(), cols);
      for (Index c = 0; c < w.size(); ++c) y[c] = w[c] * s[c];
      quantize_row_weighted(m.plan->to, y.data(), importance.data(), q.data(), cols);
      dequantize_row(m.plan->to, q.data(), y.data(), cols);
      float* dr = d.data() + static_cast<Index>(i) * static_cast<Index>(cols);
      for (Index c = 0; c < w.size(); ++c) dr[c] = y[c] / s[c] - w[c];
    }
  });
  return linalg::sum_of_quadratic_forms(d.data(), sampled, cols, h.data()) * static_cast<double>(rows) /
         static_cast<double>(sampled);
}

}  // namespace

AwqScales search_awq_scales(const GgufFile& in, const std::vector<TensorQuantPlan>& plans,
                            const ImportanceMatrix& importance, ThreadPool& pool) {
  linalg::require();
  std::unordered_map<std::string, Matrix> by_name;
  const auto& tensors = in.tensors();
  for (Index i = 0; i < tensors.size(); ++i) by_name[tensors[i].name] = {&tensors[i], &plans[i]};
  auto find = [&](const std::string& name) -> const Matrix* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &it->second;
  };

  int num_layers = 0;
  while (find(fmt::format("blk.{}.attn_norm.weight", num_layers)) || find(fmt::format("blk.{}.ffn_down.weight", num_layers)))
    ++num_layers;

  AwqScales out;
  for (int l = 0; l < num_layers; ++l) {
    const std::string blk = fmt::format("blk.{}.", l);
    struct Candidate {
      std::string input;
      std::vector<std::string> matrices;
      bool input_is_norm;
    };
    std::vector<Candidate> candidates = {
        {blk + "attn_norm.weight", {blk + "attn_q.weight", blk + "attn_k.weight", blk + "attn_v.weight"}, true},
        {blk + "ffn_norm.weight", {blk + "ffn_gate.weight", blk + "ffn_up.weight"}, true},
    };
    // down's input is act(gate) * up, linear in up's rows (no bias to scale).
    if (find(blk + "ffn_gate.weight") && !find(blk + "ffn_up.bias"))
      candidates.push_back({blk + "ffn_up.weight", {blk + "ffn_down.weight"}, false});
    // A router reads ffn_norm's output too: its layer's FFN norm is left alone.
    const bool routed = find(blk + "ffn_gate_inp.weight") != nullptr;

    for (const Candidate& cand : candidates) {
      if (routed && cand.input == blk + "ffn_norm.weight") continue;
      const Matrix* input = find(cand.input);
      if (input == nullptr) continue;
      std::vector<const Matrix*> mats;
      for (const std::string& name : cand.matrices)
        if (const Matrix* m = find(name)) mats.push_back(m);
      if (mats.size() != cand.matrices.size()) continue;
      const Matrix& first = *mats[0];
      const std::int64_t cols = first.tensor->shape[0];
      auto cov = importance.covariances.find(first.tensor->name);
      auto squares = importance.columns.find(first.tensor->name);
      if (cov == importance.covariances.end() || squares == importance.columns.end()) continue;
      bool usable = cand.input_is_norm ? input->tensor->num_dims == 1 && input->tensor->type == DType::F32 &&
                                             input->tensor->shape[0] == cols
                                       : input->tensor->num_dims == 2 && input->tensor->shape[1] == cols;
      for (const Matrix* m : mats)
        usable = usable && m->tensor->num_dims == 2 && m->tensor->shape[0] == cols && m->plan->to != m->plan->from &&
                 !is_float(m->plan->to) && importance.covariances.count(m->tensor->name) &&
                 importance.covariances.at(m->tensor->name) == cov->second;
      if (!usable) continue;

      // The whole covariance, both triangles.
      const Index size = static_cast<Index>(cols);
      std::vector<float> h(size * size);
      for (Index i = 0; i < size; ++i)
        for (Index j = i; j < size; ++j) h[i * size + j] = h[j * size + i] = cov->second->sum[i * size + j];

      AwqGroup group{cand.input, cand.matrices, 0.0, 0.0, 0.0};
      std::vector<float> best_s;
      for (double alpha : kAlphas) {
        const std::vector<float> s = channel_scales(squares->second, alpha);
        const std::vector<float> weights = scaled_importance(squares->second, s);
        double error = 0.0;
        for (const Matrix* m : mats) error += output_error(*m, s, weights, h, pool);
        if (alpha == 0.0) group.unscaled = error;
        if (alpha == 0.0 || error < group.error) {
          group.error = error;
          group.alpha = alpha;
          best_s = s;
        }
      }
      if (group.alpha > 0.0) {
        for (const Matrix* m : mats) out.columns[m->tensor->name] = best_s;
        std::vector<float>& inverse = out.rows[cand.input];
        inverse.resize(size);
        for (Index c = 0; c < size; ++c) inverse[c] = 1.0f / best_s[c];
      }
      out.groups.push_back(std::move(group));
    }
  }
  return out;
}

}  // namespace folio
