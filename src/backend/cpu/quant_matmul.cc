#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <cstddef>

#include "backend/cpu/packed_weights.h"
#include "backend/cpu/pointwise_kernels.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

// Activations of one token chunk should stay in L2 while every row panel of a
// thread passes over them.
constexpr std::size_t kChunkBytes = 256 * 1024;
// Below this many elements, quantizing the activations costs less than waking
// the other threads.
constexpr std::int64_t kParallelQuantizeElems = 1 << 16;
// How far ahead the first tile of R rows prefetches weights, in bytes
// (rounded up to whole tiles): enough to cover memory latency at full bandwidth.
constexpr std::int64_t kPrefetchBytes = 16384;

const MatmulKernels* select_kernels(const CpuFeatures& f) {
  if (f.avx512_vnni) return &matmul_kernels_avx512_vnni();
  if (f.avx512) return &matmul_kernels_avx512();
  if (f.avx2) return &matmul_kernels_avx2();
  return nullptr;
}

}  // namespace

QuantMatmul::QuantMatmul(const CpuFeatures& features, MatmulPrecision precision)
    : kernels_(select_kernels(features)), precision_(precision) {}

const WeightKernels* QuantMatmul::kernels_for(const Tensor& w) const {
  const auto type = static_cast<int>(w.dtype);
  const WeightKernels* wk = nullptr;
  if (w.layout == Layout::kCpuPacked) {
    // Only pack() makes these, and only where the packed kernels exist.
    FOLIO_CHECK(kernels_ != nullptr && precision_ == MatmulPrecision::kQ8 && type < kMaxDTypeId);
    wk = &kernels_->q8_packed[type];
    FOLIO_CHECK(wk->tiles[0][0] != nullptr);
  } else if (kernels_ != nullptr && type < kMaxDTypeId) {
    wk = precision_ == MatmulPrecision::kQ8 ? &kernels_->q8[type] : &kernels_->f32[type];
  }
  return wk == nullptr || wk->tiles[0][0] == nullptr ? nullptr : wk;
}

bool QuantMatmul::groupable(std::span<const MatmulTarget> targets, bool glu) const {
  if (targets.empty()) return false;
  const WeightKernels* first = kernels_for(*targets[0].w);
  if (first == nullptr || (glu && first->act == ActFormat::kF32)) return false;
  for (const MatmulTarget& t : targets) {
    const WeightKernels* wk = kernels_for(*t.w);
    if (wk == nullptr || wk->act != first->act) return false;
  }
  return true;
}

void QuantMatmul::run(ThreadPool& pool, const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  if (kernels_for(w) == nullptr) return run_reference(pool, w, x, y, bias);
  const MatmulTarget target{&w, &y, bias};
  run_group(pool, Input{&x}, {&target, 1});
}

void QuantMatmul::run_group(ThreadPool& pool, const Input& in, std::span<const MatmulTarget> targets) {
  const Tensor& x = *in.x;
  const std::int64_t k = x.cols(), n = x.rows();
  if (n == 0 || targets.empty()) return;
  const ActFormat act = kernels_for(*targets[0].w)->act;

  // The activations, once for every target.
  TileArgs base;
  base.k = k;
  if (act == ActFormat::kF32) {
    FOLIO_CHECK(in.up == nullptr);
    base.x = static_cast<const std::byte*>(x.data);
    base.x_stride = static_cast<std::size_t>(k) * sizeof(float);
  } else {
    const ActQ8Layout layout = ActQ8Layout::make(act, k);
    const std::size_t need = static_cast<std::size_t>(n) * layout.row_bytes;
    if (act_.size() < need) act_ = host_buffer(std::max(need, act_.size() * 3 / 2));
    auto* rows = static_cast<std::byte*>(act_.data());
    const QuantizeActFn quantize = kernels_->quantize;
    auto quantize_tokens = [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> glu(in.up != nullptr ? static_cast<std::size_t>(k) : 0);
      for (std::int64_t t = begin; t < end; ++t) {
        const float* row = x.as<const float>() + t * k;
        if (in.up != nullptr) {
          cpu_pointwise::glu_row(row, in.up->as<const float>() + t * k, in.act, k, glu.data());
          row = glu.data();
        }
        quantize(layout, row, rows + t * layout.row_bytes);
      }
    };
    if (n * k >= kParallelQuantizeElems) {
      pool.parallel_for(n, quantize_tokens);
    } else {
      quantize_tokens(0, n);
    }
    base.x = rows;
    base.x_stride = layout.row_bytes;
    base.x_d_offset = layout.d_offset;
    base.x_sums_offset = layout.sums_offset;
    base.x_dsums_offset = layout.dsums_offset;
  }

  // The work, in units: each target's tiles of R rows, its last unit also
  // taking the rows after its last tile, P at a time (a target of fewer than
  // R rows is one unit of P-row tiles), so that every row's tile shape is
  // fixed by its own target's m alone.
  struct Job {
    const WeightKernels* wk;
    TileArgs base;
    std::int64_t m, tiles, prefetch_rows, first_unit;
  };
  std::vector<Job> jobs;
  jobs.reserve(targets.size());
  std::int64_t num_units = 0;
  int widest = 1;
  for (const MatmulTarget& t : targets) {
    if (t.w->rows() == 0) continue;
    Job j{kernels_for(*t.w), base, t.w->rows(), 0, 0, num_units};
    const int R = j.wk->rows;
    j.base.w = static_cast<const std::byte*>(t.w->data);
    j.base.w_stride = t.w->row_bytes();
    j.base.y = t.y->as<float>();
    j.base.y_stride = j.m;
    j.base.bias = t.bias != nullptr ? t.bias->as<const float>() : nullptr;
    j.tiles = j.m / R;  // whole tiles of R rows
    const std::int64_t tile_bytes = R * static_cast<std::int64_t>(j.base.w_stride);
    j.prefetch_rows = (kPrefetchBytes + tile_bytes - 1) / tile_bytes * R;
    num_units += std::max<std::int64_t>(1, j.tiles);
    widest = std::max(widest, j.wk->tokens[0]);
    jobs.push_back(j);
  }
  if (num_units == 0) return;

  const std::int64_t chunk =
      std::max<std::int64_t>(widest, static_cast<std::int64_t>(kChunkBytes / base.x_stride) / widest * widest);
  const std::int64_t num_chunks =
      std::max<std::int64_t>(1, std::min<std::int64_t>(num_units, pool.size() * ThreadPool::kChunksPerThread));
  pool.run_chunks(num_chunks, [&](std::int64_t c, int) {
    const std::int64_t unit_begin = num_units * c / num_chunks, unit_end = num_units * (c + 1) / num_chunks;
    for (std::int64_t t0 = 0; t0 < n; t0 += chunk) {
      const std::int64_t t1 = std::min(n, t0 + chunk);
      std::size_t ji = 0;
      for (std::int64_t u = unit_begin; u < unit_end; ++u) {
        while (ji + 1 < jobs.size() && jobs[ji + 1].first_unit <= u) ++ji;
        const Job& j = jobs[ji];
        const WeightKernels& wk = *j.wk;
        const int R = wk.rows;
        auto tile_at = [&](TileFn fn, std::int64_t row, std::int64_t rows, std::int64_t token, bool prefetch) {
          TileArgs a = j.base;
          a.rows = rows;
          a.w = j.base.w + row * j.base.w_stride;
          a.x = j.base.x + token * j.base.x_stride;
          a.y = j.base.y + token * j.m + row;
          a.bias = j.base.bias != nullptr ? j.base.bias + row : nullptr;
          // The first tile of R rows fetches the weights of rows further on.
          if (prefetch && row + j.prefetch_rows + R <= j.m)
            a.prefetch = j.base.w + (row + j.prefetch_rows) * j.base.w_stride;
          fn(a);
        };
        // Tokens [t0, t1) of rows [row, row + R or P), in the widest tiles that fit.
        auto tokens_of = [&](int shape, std::int64_t row) {
          const std::int64_t rows = std::min<std::int64_t>(shape == 0 ? R : wk.panel_rows, j.m - row);
          std::int64_t t = t0;
          for (int s = 0; s < WeightKernels::kTokenShapes; ++s)
            for (; t + wk.tokens[s] <= t1; t += wk.tokens[s])
              tile_at(wk.tiles[shape][s], row, rows, t, shape == 0 && t == t0);
        };
        const std::int64_t p = u - j.first_unit;
        if (p < j.tiles) tokens_of(0, p * R);
        if (p == std::max<std::int64_t>(1, j.tiles) - 1)
          for (std::int64_t row = j.tiles * R; row < j.m; row += wk.panel_rows) tokens_of(1, row);
      }
    }
  });
}

void QuantMatmul::run_reference(ThreadPool& pool, const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  const std::int64_t m = w.rows();
  pool.parallel_for(m, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> scratch;
    reference::matmul_rows(w, x, y, bias, begin, end, scratch);
  });
}

void QuantMatmul::embedding(ThreadPool& pool, const Tensor& table, const Tensor& ids, Tensor& out) {
  const auto type = static_cast<int>(table.dtype);
  DequantizeRowFn decode = nullptr;
  if (kernels_ != nullptr && type < kMaxDTypeId) decode = kernels_->dequantize[type];
  const std::int64_t dim = table.cols();
  const bool packed = table.layout == Layout::kCpuPacked;
  pool.parallel_for(ids.numel(), [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::byte> plain(packed ? table.row_bytes() : 0);
    const std::int64_t panel_rows = packed ? packed_panel_rows(table.dtype) : 1;
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int32_t id = ids.as<const std::int32_t>()[i];
      const void* row = table.row(id);
      if (packed) {
        const auto* panel = static_cast<const std::byte*>(table.row(id / panel_rows * panel_rows));
        unpack_row(table.dtype, panel, static_cast<int>(id % panel_rows), plain.data(), dim);
        row = plain.data();
      }
      float* dst = out.as<float>() + i * dim;
      if (decode != nullptr) {
        decode(row, dst, dim);
      } else {
        dequantize_row(table.dtype, row, dst, dim);
      }
    }
  });
}

Buffer QuantMatmul::pack(ThreadPool& pool, Tensor& w) const {
  const auto type = static_cast<int>(w.dtype);
  if (kernels_ == nullptr || precision_ != MatmulPrecision::kQ8 || w.layout != Layout::kGguf ||
      w.device != Device::kCpu || !is_packable(w.dtype) || type >= kMaxDTypeId ||
      kernels_->q8_packed[type].tiles[0][0] == nullptr || w.rows() == 0)
    return {};
  // Panels of P rows, the last one padded; a stack of matrices (experts)
  // must keep each matrix's first row at the start of a panel.
  const std::int64_t P = packed_panel_rows(w.dtype), rows = w.rows();
  if (w.ndim > 2 && w.shape[w.ndim - 2] % P != 0) return {};
  const std::int64_t panels = (rows + P - 1) / P;
  const std::size_t row_bytes = w.row_bytes();
  Buffer packed = host_buffer(static_cast<std::size_t>(panels * P) * row_bytes + kPackedSlackBytes);
  const auto* src = static_cast<const std::byte*>(w.data);
  auto* dst = static_cast<std::byte*>(packed.data());
  pool.parallel_for(panels, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p)
      pack_panel(w.dtype, src + p * P * row_bytes, row_bytes, static_cast<int>(std::min(P, rows - p * P)),
                 dst + p * P * row_bytes, w.cols());
  });
  w.data = packed.data();
  w.layout = Layout::kCpuPacked;
  return packed;
}

}  // namespace folio
