#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <cstddef>

#include "backend/cpu/packed_weights.h"
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
// How far ahead a panel's first tile prefetches weights, in bytes (rounded up
// to whole panels): enough to cover memory latency at full bandwidth.
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

void QuantMatmul::run(ThreadPool& pool, const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  const std::int64_t m = w.rows(), k = w.cols(), n = x.rows();
  if (m == 0 || n == 0) return;
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
  if (wk == nullptr || wk->tiles[0][0] == nullptr) return run_reference(pool, w, x, y, bias);

  TileArgs base;
  base.w = static_cast<const std::byte*>(w.data);
  base.w_stride = w.row_bytes();
  base.k = k;
  base.y_stride = m;
  if (wk->act == ActFormat::kF32) {
    base.x = static_cast<const std::byte*>(x.data);
    base.x_stride = static_cast<std::size_t>(k) * sizeof(float);
  } else {
    const ActQ8Layout layout = ActQ8Layout::make(wk->act, k);
    const std::size_t need = static_cast<std::size_t>(n) * layout.row_bytes;
    if (act_.size() < need) act_ = Buffer(std::max(need, act_.size() * 3 / 2));
    auto* rows = static_cast<std::byte*>(act_.data());
    const QuantizeActFn quantize = kernels_->quantize;
    auto quantize_tokens = [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) quantize(layout, x.as<const float>() + t * k, rows + t * layout.row_bytes);
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
  }

  const int R = wk->rows, T = wk->tokens[0];
  const std::int64_t chunk = std::max<std::int64_t>(T, static_cast<std::int64_t>(kChunkBytes / base.x_stride) / T * T);
  const std::int64_t num_panels = m / R;
  const std::int64_t panel_bytes = R * static_cast<std::int64_t>(base.w_stride);
  const std::int64_t prefetch_rows = (kPrefetchBytes + panel_bytes - 1) / panel_bytes * R;
  // Whole panels of R rows per chunk; the last chunk also takes the rows after
  // the last panel, so every row's tile shape is fixed by m alone.
  const std::int64_t num_chunks =
      std::max<std::int64_t>(1, std::min<std::int64_t>(num_panels, pool.size() * ThreadPool::kChunksPerThread));
  pool.run_chunks(num_chunks, [&](std::int64_t c, int) {
    const std::int64_t row_begin = num_panels * c / num_chunks * R;
    const std::int64_t row_end = c == num_chunks - 1 ? m : num_panels * (c + 1) / num_chunks * R;
    auto tile_at = [&](TileFn fn, std::int64_t row, std::int64_t token, bool prefetch) {
      TileArgs a = base;
      a.w = base.w + row * base.w_stride;
      a.x = base.x + token * base.x_stride;
      a.y = y.as<float>() + token * m + row;
      a.bias = bias != nullptr ? bias->as<const float>() + row : nullptr;
      // The first tile of a panel fetches the weights of a panel further on.
      if (prefetch && row + prefetch_rows + R <= m) a.prefetch = base.w + (row + prefetch_rows) * base.w_stride;
      fn(a);
    };
    // Tokens [t0, t1) of rows [row, row + R or 1), in the widest tiles that fit.
    auto tokens_of = [&](int shape, std::int64_t row, std::int64_t t0, std::int64_t t1) {
      std::int64_t t = t0;
      for (int s = 0; s < WeightKernels::kTokenShapes; ++s)
        for (; t + wk->tokens[s] <= t1; t += wk->tokens[s]) tile_at(wk->tiles[shape][s], row, t, shape == 0 && t == t0);
    };
    for (std::int64_t t0 = 0; t0 < n; t0 += chunk) {
      const std::int64_t t1 = std::min(n, t0 + chunk);
      std::int64_t row = row_begin;
      for (; row + R <= row_end; row += R) tokens_of(0, row, t0, t1);
      for (; row < row_end; ++row) tokens_of(1, row, t0, t1);
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
    for (std::int64_t i = begin; i < end; ++i) {
      const void* row = table.row(ids.as<const std::int32_t>()[i]);
      if (packed) {
        unpack_row(table.dtype, static_cast<const std::byte*>(row), plain.data(), dim);
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
  Buffer packed(w.bytes() + kPackedSlackBytes);
  const std::size_t row_bytes = w.row_bytes();
  const auto* src = static_cast<const std::byte*>(w.data);
  auto* dst = static_cast<std::byte*>(packed.data());
  pool.parallel_for(w.rows(), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) pack_row(w.dtype, src + r * row_bytes, dst + r * row_bytes, w.cols());
  });
  w.data = packed.data();
  w.layout = Layout::kCpuPacked;
  return packed;
}

}  // namespace folio
