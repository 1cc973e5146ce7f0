// ForwardingBackend: a Backend that hands every call to an inner one, the
// base of the wrappers (ObservingBackend, SealedBackend, DeferredBackend), so
// that each overrides only what it changes. Every op passes its tensors
// through view() (how the inner backend is to see them: SealedBackend
// unseals them) and runs as a closure holding copies of its arguments - the
// tensor views and the contents of its spans - through issue() (at once by
// default; DeferredBackend queues it). A new op is one method here.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace folio {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner);

  Backend& inner() { return *inner_; }
  const Backend& inner() const { return *inner_; }

  std::string name() const override { return inner_->name(); }
  Device device() const override { return inner_->device(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  std::string numerics() const override { return inner_->numerics(); }
  Buffer allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  Buffer allocate_host(std::size_t bytes) override { return inner_->allocate_host(bytes); }
  void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override;
  void synchronize() override { inner_->synchronize(); }
  QueuePoint queue_point() override { return inner_->queue_point(); }
  void wait_until(QueuePoint point) override { inner_->wait_until(point); }
  Buffer load_weight(Tensor& w) override { return inner_->load_weight(w); }
  bool has_linear_attention() const override { return inner_->has_linear_attention(); }

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) override;
  void matmuls(const Tensor& x, std::span<const MatmulTarget> targets) override;
  void glu_matmul(const Tensor& w, Tensor& gate, const Tensor& up, GluActivation act, Tensor& y) override;
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

 protected:
  // The tensor as the inner backend is to see it; `what` names it in errors.
  virtual Tensor view(const Tensor& t, const char* what) { return t; }
  // Runs one op on the inner backend: here and now unless overridden.
  virtual void issue(std::function<void()> op) { op(); }

 private:
  PagedKv view_kv(const PagedKv& kv);
  AttentionMetadata view_meta(const AttentionMetadata& meta);
  RecurrentState view_state(const RecurrentState& state);

  std::unique_ptr<Backend> inner_;
};

}  // namespace folio
