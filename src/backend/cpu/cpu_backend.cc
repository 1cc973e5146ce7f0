#include "backend/cpu/cpu_backend.h"

#include <algorithm>

#include "backend/op_checks.h"
#include "core/error.h"
#include "tensor/quantize.h"

namespace folio {

CpuBackend::CpuBackend(int num_threads, std::string_view max_level, MatmulPrecision precision)
    : features_(CpuFeatures::detect(max_level)),
      pool_(num_threads),
      matmul_(features_, precision),
      scratch_(static_cast<std::size_t>(pool_.size())) {}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  op_checks::embedding(table, ids, out);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    std::int32_t id = ids.as<const std::int32_t>()[i];
    if (id < 0 || id >= table.rows()) fail("token id {} is outside the vocabulary of {}", id, table.rows());
  }
  matmul_.embedding(pool_, table, ids, out);
}

void CpuBackend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  op_checks::matmul(w, x, y, bias);
  matmul_.run(pool_, w, x, y, bias);
}

void CpuBackend::attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                           const AttentionParams& params, Tensor& out) {
  op_checks::attention(q, kv, meta, out);
  const std::int64_t items = q.shape[0] * q.shape[1];
  pool_.run_chunks(std::min<std::int64_t>(items, pool_.size() * ThreadPool::kChunksPerThread), [&](std::int64_t c, int t) {
    const std::int64_t chunks = std::min<std::int64_t>(items, pool_.size() * ThreadPool::kChunksPerThread);
    reference::attention_items(q, kv, meta, params, out, items * c / chunks, items * (c + 1) / chunks, scratch_[t]);
  });
}

}  // namespace folio
