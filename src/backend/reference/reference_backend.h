// ReferenceBackend: every op as plain, single-threaded loops in fp32, written
// to be obviously right. The other backends are tested against it. Its
// activations are f32, f16 or bf16 (chosen at construction): in f16 and bf16
// each op converts its inputs to f32, runs the f32 loops and rounds what it
// stores, so the reference of every activation type is the f32 one with a
// rounding at each op's output.
#pragma once

#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/sampling/row_sampler.h"

namespace folio {

// The reference kernels over a range of their work, so that a threaded
// backend can split the same arithmetic over threads and stay bit-identical.
// All f32.
namespace reference {

// Output rows [row_begin, row_end) of matmul.
void matmul_rows(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias, std::int64_t row_begin,
                 std::int64_t row_end, std::vector<float>& scratch);

// Items [item_begin, item_end) of attention, item = token * num_heads + head.
void attention_items(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                     const AttentionParams& params, Tensor& out, std::int64_t item_begin, std::int64_t item_end,
                     std::vector<float>& scores);

// Tokens [token_begin, token_end) of moe_combine.
void moe_combine_tokens(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out,
                        std::int64_t token_begin, std::int64_t token_end);

// Expert e's row range [begin, end) of expert_matmul's offsets, checked.
std::pair<std::int64_t, std::int64_t> expert_rows(const Tensor& offsets, std::int64_t e, std::int64_t num_rows);

// Rows [row_begin, row_end) of the sampling op, each checked against the
// batch (its logits row, adjustments and logprob slot in range).
void sample_rows(const Tensor& logits, const SamplingBatch& batch, std::int64_t row_begin, std::int64_t row_end,
                 RowSampler& sampler);

// Sequences [seq_begin, seq_end) of causal_conv1d and gated_delta_rule
// (reference/delta_net.cc), f32 activations.
void causal_conv1d_seqs(const Tensor& x, const Tensor& w, const AttentionMetadata& meta, const Tensor& state_slots,
                        RecurrentState& state, Tensor& out, std::int64_t seq_begin, std::int64_t seq_end);
void gated_delta_rule_seqs(const Tensor& qkv, const Tensor& a, const Tensor& b, const DeltaRuleParams& params,
                           const AttentionMetadata& meta, const Tensor& state_slots, RecurrentState& state,
                           Tensor& out, std::int64_t seq_begin, std::int64_t seq_end);

}  // namespace reference

class ReferenceBackend : public Backend {
 public:
  // activations: F32, F16 or BF16.
  explicit ReferenceBackend(DType activations = DType::F32);

  std::string name() const override { return "reference"; }
  Device device() const override { return Device::kCpu; }
  DType activation_dtype() const override { return act_; }
  Buffer allocate(std::size_t bytes) override { return host_buffer(bytes); }
  void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override;
  // Weights are read where they lie, in the file's layout.
  Buffer load_weight(Tensor& w) override;

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void rope(Tensor& x, const Tensor& positions, const RopeTable& table) override;
  void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) override;
  void add(Tensor& x, const Tensor& y) override;
  void scale(Tensor& x, float s) override;
  void scale_logits(Tensor& logits, float scale, float softcap) override;
  void write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) override;
  void attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta, const AttentionParams& params,
                 Tensor& out) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  void copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) override;
  void moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) override;
  void moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) override;
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
  void sample(const Tensor& logits, const SamplingBatch& batch) override;

 private:
  DType act_;
  RowSampler sampler_;
};

}  // namespace folio
