// CpuBackend: SIMD kernels (chosen once from the processor's features) split
// over a persistent thread pool, by output rows for matmul and by (token,
// head) for attention. Each output is computed by one thread in a fixed order,
// so results are independent of the batch and of the thread count. Below AVX2,
// and for the ops that move a few numbers per token (routing, grouping,
// gathers, block copies), it runs the reference's code: explicitly, op by op.
#pragma once

#include <memory>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/reference/reference_backend.h"
#include "core/thread_pool.h"

namespace folio {

class CpuBackend final : public Backend {
 public:
  // max_level caps the SIMD level (see CpuFeatures::detect); precision picks
  // the matmul kernels (kQ8: fast integer dots, kF32: f32 FMAs).
  explicit CpuBackend(int num_threads, std::string_view max_level = {},
                      MatmulPrecision precision = MatmulPrecision::kQ8);
  std::string name() const override { return "cpu"; }
  // The SIMD level and the matmul precision choose the kernels.
  std::string numerics() const override {
    return "cpu " + features_.level() + (matmul_precision() == MatmulPrecision::kQ8 ? " q8" : " f32");
  }
  Device device() const override { return Device::kCpu; }
  int num_threads() const { return pool_.size(); }
  const CpuFeatures& features() const { return features_; }
  MatmulPrecision matmul_precision() const { return matmul_.precision(); }

  Buffer allocate(std::size_t bytes) override { return host_buffer(bytes); }
  void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override;
  // Block32 weights (Q4_0 .. Q8_0) are packed for the kQ8 kernels
  // (packed_weights.h): a copy as large as the tensor, made once at load.
  // The others are read in the mapped file, whose pages this reads in.
  Buffer load_weight(Tensor& w) override;

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) override;
  void matmuls(const Tensor& x, std::span<const MatmulTarget> targets) override;
  void glu_matmul(const Tensor& w, Tensor& gate, const Tensor& up, GluActivation act, Tensor& y) override;
  void attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta, const AttentionParams& params,
                 Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void rope(Tensor& x, const Tensor& positions, const RopeTable& table) override;
  void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) override;
  void add(Tensor& x, const Tensor& y) override;
  void scale(Tensor& x, float s) override;
  void scale_logits(Tensor& logits, float scale, float softcap) override;
  void write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  void copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) override;
  void moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) override;
  void moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) override;
  // One threaded matmul per expert that has rows.
  void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y, const Tensor* bias) override;
  void moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) override;
  void moe_route_grouped(const Tensor& router_logits, const Tensor* selection_bias, const GroupedRouting& routing,
                         Tensor& ids, Tensor& weights) override;
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) override;
  void causal_conv1d(const Tensor& x, const Tensor& w, const AttentionMetadata& meta, const Tensor& state_slots,
                     RecurrentState& state, Tensor& out) override;
  void gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const DeltaRuleParams& params,
                        const AttentionMetadata& meta, const Tensor& state_slots, RecurrentState& state,
                        Tensor& out) override;
  // The reference's rows, split over threads (one RowSampler each).
  void sample(const Tensor& logits, const SamplingBatch& batch) override;

 private:
  CpuFeatures features_;
  ThreadPool pool_;
  QuantMatmul matmul_;
  CpuAttention attention_;
  ReferenceBackend reference_;
  std::vector<std::vector<float>> scratch_;  // one per thread
  std::vector<RowSampler> samplers_;         // one per thread
};

}  // namespace folio
