#include "offline/gptq.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "offline/linalg.h"
#include "tensor/code_layout.h"
#include "tensor/quantize.h"

namespace folio {

namespace {

using Index = std::size_t;

// One row's columns [begin, end) of a lazy batch: quantizes each in turn
// and spreads its error over the batch's later columns. err[j - begin] gets
// column j's error over U[j][j], for the update of the columns after the batch.
void quantize_batch_row(const CodeLayout& layout, float* w, const float* u, std::int64_t cols, std::int64_t begin,
                        std::int64_t end, const float* importance, std::uint8_t* dst, float* err) {
  const int n = layout.block_elems;
  const Index block_bytes = static_cast<Index>(info(layout.type).block_bytes);
  std::vector<std::uint8_t> block(block_bytes);
  std::vector<float> levels(static_cast<Index>(layout.num_codes()) * static_cast<Index>(n));
  for (std::int64_t j = begin; j < end; ++j) {
    const int e = static_cast<int>(j % n);
    if (e == 0) {
      // The block's scales, fitted to its values as they stand now.
      quantize_row_weighted(layout.type, w + j, importance + j, block.data(), n);
      block_levels(layout, block.data(), levels.data());
    }
    // The nearest value the scales allow.
    std::uint32_t best = 0;
    float best_distance = std::numeric_limits<float>::infinity();
    for (int c = 0; c < layout.num_codes(); ++c) {
      const float d = std::fabs(levels[static_cast<Index>(c) * static_cast<Index>(n) + static_cast<Index>(e)] - w[j]);
      if (d < best_distance) {
        best_distance = d;
        best = static_cast<std::uint32_t>(c);
      }
    }
    layout.set_code(block.data(), e, best);
    const float q = levels[static_cast<Index>(best) * static_cast<Index>(n) + static_cast<Index>(e)];
    const float* u_row = u + static_cast<Index>(j) * static_cast<Index>(cols);
    const float scaled = (w[j] - q) / u_row[j];
    err[j - begin] = scaled;
    for (std::int64_t k = j + 1; k < end; ++k) w[k] -= scaled * u_row[k];
    if (e == n - 1) std::memcpy(dst + static_cast<Index>(j / n) * block_bytes, block.data(), block_bytes);
  }
}

}  // namespace

void accumulate_covariance(InputCovariance& h, const float* x, std::int64_t rows) {
  FOLIO_CHECK(h.cols > 0 && rows >= 0);
  h.sum.resize(static_cast<Index>(h.cols) * static_cast<Index>(h.cols), 0.0f);
  linalg::add_gram(h.sum.data(), x, rows, h.cols);
  h.rows += rows;
}

void gptq_quantize(DType type, float* w, std::int64_t rows, std::int64_t cols, const InputCovariance& h,
                   std::uint8_t* dst, ThreadPool& pool, const GptqOptions& options) {
  linalg::require();
  const CodeLayout* layout = code_layout(type);
  if (layout == nullptr) fail("GPTQ cannot write {}: its elements are not codes under block scales", name(type));
  const std::int64_t n = layout->block_elems;
  FOLIO_CHECK(h.cols == cols && cols % n == 0 && static_cast<std::int64_t>(h.sum.size()) == cols * cols && h.rows > 0);
  const Index size = static_cast<Index>(cols);

  // The mean second moments; an input that was always zero gets a unit
  // diagonal and its weights zero (they never met a non-zero input).
  std::vector<float> hm(h.sum.size());
  const float inv_rows = 1.0f / static_cast<float>(h.rows);
  for (Index i = 0; i < size; ++i)
    for (Index j = i; j < size; ++j) hm[i * size + j] = hm[j * size + i] = h.sum[i * size + j] * inv_rows;
  double mean_diagonal = 0.0;
  for (Index i = 0; i < size; ++i) {
    if (hm[i * size + i] == 0.0f) {
      hm[i * size + i] = 1.0f;
      for (std::int64_t r = 0; r < rows; ++r) w[static_cast<Index>(r) * size + i] = 0.0f;
    }
    mean_diagonal += hm[i * size + i];
  }
  mean_diagonal /= static_cast<double>(cols);
  std::vector<float> importance(size);
  for (Index i = 0; i < size; ++i) importance[i] = hm[i * size + i];

  // Damped until the factor exists (each try ten times the last).
  std::vector<float> u;
  double damp = options.damp;
  for (int attempt = 0;; ++attempt) {
    u = hm;
    for (Index i = 0; i < size; ++i) u[i * size + i] += static_cast<float>(damp * mean_diagonal);
    if (linalg::inverse_upper_factor(u, cols)) break;
    if (attempt == 4) fail("GPTQ: the input covariance is not positive definite even damped by {}", damp);
    damp *= 10.0;
  }

  // Lazy batches of at least 128 columns and whole blocks, so each block's
  // scales are fitted after every earlier column's error has reached it.
  const std::int64_t batch = std::max<std::int64_t>(128, n);
  const Index out_row = static_cast<Index>(row_bytes(type, cols));
  std::vector<float> err(static_cast<Index>(rows) * static_cast<Index>(batch));
  for (std::int64_t begin = 0; begin < cols; begin += batch) {
    const std::int64_t end = std::min(cols, begin + batch);
    const std::int64_t width = end - begin;
    pool.parallel_for(rows, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t r = first; r < last; ++r)
        quantize_batch_row(*layout, w + static_cast<Index>(r) * size, u.data(), cols, begin, end, importance.data(),
                           dst + static_cast<Index>(r) * out_row,
                           err.data() + static_cast<Index>(r) * static_cast<Index>(width));
    });
    // w[:, end:] -= err * U[begin:end, end:]
    linalg::subtract_product(rows, cols - end, width, err.data(), width, u.data() + static_cast<Index>(begin) * size + static_cast<Index>(end),
                             cols, w + end, cols);
  }
}

}  // namespace folio
