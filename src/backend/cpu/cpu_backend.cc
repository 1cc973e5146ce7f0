#include "backend/cpu/cpu_backend.h"

#include <algorithm>

#include "backend/cpu/pointwise_kernels.h"
#include "backend/op_checks.h"
#include "core/error.h"
#include "tensor/quantize.h"

namespace folio {

CpuBackend::CpuBackend(int num_threads, std::string_view max_level, MatmulPrecision precision)
    : features_(CpuFeatures::detect(max_level)),
      pool_(num_threads),
      matmul_(features_, precision),
      scratch_(static_cast<std::size_t>(pool_.size())) {}

// Below AVX2 the ops run the reference code (split over threads where it counts).
void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  op_checks::rms_norm(x, w, out);
  if (!features_.avx2) return ReferenceBackend::rms_norm(x, w, eps, out);
  cpu_pointwise::rms_norm(pool_, x, w, eps, out);
}

void CpuBackend::rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  op_checks::rope(x, positions, table);
  if (!features_.avx2) return ReferenceBackend::rope(x, positions, table);
  cpu_pointwise::rope(pool_, x, positions, table);
}

void CpuBackend::glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  op_checks::same_f32_shape(gate, up, "glu");
  op_checks::same_f32_shape(gate, out, "glu");
  if (!features_.avx2) return ReferenceBackend::glu(gate, up, act, out);
  cpu_pointwise::glu(pool_, gate, up, act, out);
}

void CpuBackend::add(Tensor& x, const Tensor& y) {
  op_checks::same_f32_shape(x, y, "add");
  cpu_pointwise::add(pool_, x, y);
}

void CpuBackend::scale(Tensor& x, float s) { cpu_pointwise::scale(pool_, x, s); }

void CpuBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) {
  op_checks::write_kv(k, v, slot_mapping, kv);
  if (!features_.avx2) return ReferenceBackend::write_kv(k, v, slot_mapping, kv);
  cpu_pointwise::write_kv(pool_, k, v, slot_mapping, kv);
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  op_checks::embedding(table, ids, out);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    std::int32_t id = ids.as<const std::int32_t>()[i];
    if (id < 0 || id >= table.rows()) fail("token id {} is outside the vocabulary of {}", id, table.rows());
  }
  matmul_.embedding(pool_, table, ids, out);
}

Buffer CpuBackend::prepare_weight(Tensor& w) { return matmul_.pack(pool_, w); }

void CpuBackend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  op_checks::matmul(w, x, y, bias);
  matmul_.run(pool_, w, x, y, bias);
}

void CpuBackend::matmuls(const Tensor& x, std::span<const MatmulTarget> targets) {
  for (const MatmulTarget& t : targets) op_checks::matmul(*t.w, x, *t.y, t.bias);
  if (!matmul_.groupable(targets, false)) return Backend::matmuls(x, targets);
  matmul_.run_group(pool_, {&x}, targets);
}

void CpuBackend::glu_matmul(const Tensor& w, Tensor& gate, const Tensor& up, GluActivation act, Tensor& y) {
  op_checks::same_f32_shape(gate, up, "glu");
  op_checks::matmul(w, gate, y, nullptr);
  const MatmulTarget target{&w, &y, nullptr};
  if (!features_.avx2 || !matmul_.groupable({&target, 1}, true)) return Backend::glu_matmul(w, gate, up, act, y);
  matmul_.run_group(pool_, {&gate, &up, act}, {&target, 1});
}

void CpuBackend::attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                           const AttentionParams& params, Tensor& out) {
  op_checks::attention(q, kv, meta, out);
  if (features_.avx2) return attention_.run(pool_, q, kv, meta, params, out);
  const std::int64_t items = q.shape[0] * q.shape[1];
  pool_.run_chunks(std::min<std::int64_t>(items, pool_.size() * ThreadPool::kChunksPerThread), [&](std::int64_t c, int t) {
    const std::int64_t chunks = std::min<std::int64_t>(items, pool_.size() * ThreadPool::kChunksPerThread);
    reference::attention_items(q, kv, meta, params, out, items * c / chunks, items * (c + 1) / chunks, scratch_[t]);
  });
}

void CpuBackend::expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y) {
  op_checks::expert_matmul(w, x, offsets, y);
  for (std::int64_t e = 0; e < w.shape[0]; ++e) {
    const auto [begin, end] = reference::expert_rows(offsets, e, x.rows());
    if (begin == end) continue;
    Tensor ye = y.rows_view(begin, end - begin);
    matmul_.run(pool_, expert_weight(w, e), x.rows_view(begin, end - begin), ye, nullptr);
  }
}

// The reference's arithmetic split over threads by token: bit-identical.
void CpuBackend::moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) {
  op_checks::moe_combine(y, assignment_rows, weights, out);
  pool_.parallel_for(out.rows(), [&](std::int64_t begin, std::int64_t end) {
    reference::moe_combine_tokens(y, assignment_rows, weights, out, begin, end);
  });
}

}  // namespace folio
