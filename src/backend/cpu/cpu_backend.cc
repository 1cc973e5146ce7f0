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
      scratch_(static_cast<std::size_t>(pool_.size())),
      samplers_(static_cast<std::size_t>(pool_.size())) {}

void CpuBackend::copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) {
  reference_.copy_to_device(dst, src, bytes);
}

void CpuBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
  reference_.copy_to_host(dst, src, bytes);
}

// Below AVX2 the ops run the reference code (split over threads where it counts).
void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  op_checks::rms_norm(x, w, out, DType::F32);
  if (!features_.avx2) return reference_.rms_norm(x, w, eps, out);
  cpu_pointwise::rms_norm(pool_, x, w, eps, out);
}

void CpuBackend::rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  op_checks::rope(x, positions, table, DType::F32);
  if (!features_.avx2) return reference_.rope(x, positions, table);
  cpu_pointwise::rope(pool_, x, positions, table);
}

void CpuBackend::glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  op_checks::same_shape(gate, up, DType::F32, "glu");
  op_checks::same_shape(gate, out, DType::F32, "glu");
  if (!features_.avx2) return reference_.glu(gate, up, act, out);
  cpu_pointwise::glu(pool_, gate, up, act, out);
}

void CpuBackend::add(Tensor& x, const Tensor& y) {
  op_checks::same_shape(x, y, DType::F32, "add");
  cpu_pointwise::add(pool_, x, y);
}

void CpuBackend::scale(Tensor& x, float s) {
  op_checks::activations(x, DType::F32, "scale");
  cpu_pointwise::scale(pool_, x, s);
}

void CpuBackend::scale_logits(Tensor& logits, float scale, float softcap) {
  op_checks::scale_logits(logits, scale, softcap);
  cpu_pointwise::scale_logits(pool_, logits, scale, softcap);
}

void CpuBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) {
  op_checks::write_kv(k, v, slot_mapping, kv, DType::F32);
  if (!features_.avx2) return reference_.write_kv(k, v, slot_mapping, kv);
  cpu_pointwise::write_kv(pool_, k, v, slot_mapping, kv);
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  op_checks::embedding(table, ids, out, DType::F32);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    std::int32_t id = ids.as<const std::int32_t>()[i];
    if (id < 0 || id >= table.rows()) fail("token id {} is outside the vocabulary of {}", id, table.rows());
  }
  matmul_.embedding(pool_, table, ids, out);
}

Buffer CpuBackend::load_weight(Tensor& w) {
  FOLIO_CHECK(w.device == Device::kCpu && w.layout == Layout::kGguf);
  Buffer packed = matmul_.pack(pool_, w);
  if (!packed.empty()) return packed;
  // Read where it lies: touch every page now, so that the first forward pass
  // does not wait on the disk.
  constexpr std::size_t kPage = 4096;
  const auto* bytes = static_cast<const volatile std::uint8_t*>(w.data);
  std::uint8_t sink = 0;
  for (std::size_t off = 0; off < w.bytes(); off += kPage) sink = static_cast<std::uint8_t>(sink + bytes[off]);
  if (w.bytes() > 0) sink = static_cast<std::uint8_t>(sink + bytes[w.bytes() - 1]);
  (void)sink;
  return {};
}

void CpuBackend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  op_checks::matmul(w, x, y, bias, DType::F32);
  matmul_.run(pool_, w, x, y, bias);
}

void CpuBackend::matmuls(const Tensor& x, std::span<const MatmulTarget> targets) {
  for (const MatmulTarget& t : targets) op_checks::matmul(*t.w, x, *t.y, t.bias, DType::F32);
  if (!matmul_.groupable(targets, false)) return Backend::matmuls(x, targets);
  matmul_.run_group(pool_, {&x}, targets);
}

void CpuBackend::glu_matmul(const Tensor& w, Tensor& gate, const Tensor& up, GluActivation act, Tensor& y) {
  op_checks::same_shape(gate, up, DType::F32, "glu");
  op_checks::matmul(w, gate, y, nullptr, DType::F32);
  const MatmulTarget target{&w, &y, nullptr};
  if (!features_.avx2 || !matmul_.groupable({&target, 1}, true)) return Backend::glu_matmul(w, gate, up, act, y);
  matmul_.run_group(pool_, {&gate, &up, act}, {&target, 1});
}

void CpuBackend::attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                           const AttentionParams& params, Tensor& out) {
  op_checks::attention(q, kv, meta, params, out, DType::F32);
  if (features_.avx2) return attention_.run(pool_, q, kv, meta, params, out);
  const std::int64_t items = q.shape[0] * q.shape[1];
  pool_.run_chunks(std::min<std::int64_t>(items, pool_.size() * ThreadPool::kChunksPerThread), [&](std::int64_t c, int t) {
    const std::int64_t chunks = std::min<std::int64_t>(items, pool_.size() * ThreadPool::kChunksPerThread);
    reference::attention_items(q, kv, meta, params, out, items * c / chunks, items * (c + 1) / chunks, scratch_[t]);
  });
}

void CpuBackend::expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y,
                               const Tensor* bias) {
  op_checks::expert_matmul(w, x, offsets, y, bias, DType::F32);
  for (std::int64_t e = 0; e < w.shape[0]; ++e) {
    const auto [begin, end] = reference::expert_rows(offsets, e, x.rows());
    if (begin == end) continue;
    Tensor ye = y.rows_view(begin, end - begin);
    const Tensor be = bias != nullptr ? expert_bias(*bias, e) : Tensor();
    matmul_.run(pool_, expert_weight(w, e), x.rows_view(begin, end - begin), ye, bias != nullptr ? &be : nullptr);
  }
}

// The reference's arithmetic split over threads by token: bit-identical.
void CpuBackend::moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) {
  op_checks::moe_combine(y, assignment_rows, weights, out, DType::F32);
  pool_.parallel_for(out.rows(), [&](std::int64_t begin, std::int64_t end) {
    reference::moe_combine_tokens(y, assignment_rows, weights, out, begin, end);
  });
}

// A few numbers per token: the reference's code as it is.
void CpuBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) { reference_.gather_rows(x, rows, out); }

void CpuBackend::copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) {
  reference_.copy_blocks(kv, pairs);
}

void CpuBackend::moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) {
  reference_.moe_route(router_logits, normalize, ids, weights);
}

void CpuBackend::moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) {
  reference_.moe_group(ids, offsets, row_tokens, assignment_rows);
}

// Both touch a few numbers per token: the reference's loops are the kernel.
void CpuBackend::moe_route_grouped(const Tensor& router_logits, const Tensor* selection_bias,
                                   const GroupedRouting& routing, Tensor& ids, Tensor& weights) {
  reference_.moe_route_grouped(router_logits, selection_bias, routing, ids, weights);
}

void CpuBackend::concat_cols(const Tensor& a, const Tensor& b, Tensor& out) { reference_.concat_cols(a, b, out); }

void CpuBackend::add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) {
  reference_.add_sigmoid_gated(x, y, gate);
}

// Linear attention: the reference's loops, one sequence per task (a
// sequence's tokens depend on each other in order; sequences do not).
void CpuBackend::causal_conv1d(const Tensor& x, const Tensor& w, const AttentionMetadata& meta,
                               const Tensor& state_slots, RecurrentState& state, Tensor& out) {
  op_checks::causal_conv1d(x, w, meta, state_slots, state, out, DType::F32);
  pool_.run_chunks(meta.num_seqs, [&](std::int64_t s, int) {
    reference::causal_conv1d_seqs(x, w, meta, state_slots, state, out, s, s + 1);
  });
}

void CpuBackend::gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const DeltaRuleParams& params,
                                  const AttentionMetadata& meta, const Tensor& state_slots, RecurrentState& state,
                                  Tensor& out) {
  op_checks::gated_delta_rule(qkv, a, b, params, meta, state_slots, state, out, DType::F32);
  pool_.run_chunks(meta.num_seqs, [&](std::int64_t s, int) {
    reference::gated_delta_rule_seqs(qkv, a, b, params, meta, state_slots, state, out, s, s + 1);
  });
}

void CpuBackend::sample(const Tensor& logits, const SamplingBatch& batch) {
  op_checks::sample(logits, batch);
  pool_.run_chunks(batch.num_rows, [&](std::int64_t row, int thread) {
    reference::sample_rows(logits, batch, row, row + 1, samplers_[static_cast<std::size_t>(thread)]);
  });
}

}  // namespace folio
