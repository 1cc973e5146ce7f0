// ObservingBackend: a Backend that runs every op on another backend and shows
// each matmul's weight and a host copy of its input to an observer first.
// Calibration uses it to collect the activation statistics of every weight
// (model/importance.h) without the forward pass knowing, and tests count the
// bytes a step reads. The copies make it slow; it is for offline tools.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace folio {

class MatmulObserver {
 public:
  virtual ~MatmulObserver() = default;
  // Called before y = x * w^T runs. w is the device's weight (its identity:
  // an observer must not read it); x: [n, in] a host copy of the input, in
  // the backend's activation type.
  virtual void on_matmul(const Tensor& w, const Tensor& x) = 0;
  // Called before expert_matmul runs, with host copies of x and offsets; by
  // default each expert that has rows is shown to on_matmul as its own
  // [out, in] weight with its rows of x.
  virtual void on_expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets) {
    const auto* o = offsets.as<const std::int32_t>();
    for (std::int64_t e = 0; e < w.shape[0]; ++e)
      if (o[e + 1] > o[e]) on_matmul(expert_weight(w, e), x.rows_view(o[e], o[e + 1] - o[e]));
  }
};

class ObservingBackend final : public Backend {
 public:
  ObservingBackend(std::unique_ptr<Backend> inner, MatmulObserver& observer)
      : inner_(std::move(inner)), observer_(observer) {}

  std::string name() const override { return inner_->name(); }
  Device device() const override { return inner_->device(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  std::string numerics() const override { return inner_->numerics(); }
  Buffer allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  Buffer allocate_host(std::size_t bytes) override { return inner_->allocate_host(bytes); }
  void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) override {
    inner_->copy_to_device(dst, src, bytes);
  }
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override { inner_->copy_to_host(dst, src, bytes); }
  void synchronize() override { inner_->synchronize(); }
  Buffer load_weight(Tensor& w) override { return inner_->load_weight(w); }
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override { inner_->embedding(table, ids, out); }
  void matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) override {
    observer_.on_matmul(w, host_copy(x, x_));
    inner_->matmul(w, x, y, bias);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override { inner_->rms_norm(x, w, eps, out); }
  void rope(Tensor& x, const Tensor& positions, const RopeTable& table) override { inner_->rope(x, positions, table); }
  void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) override {
    inner_->glu(gate, up, act, out);
  }
  void add(Tensor& x, const Tensor& y) override { inner_->add(x, y); }
  void scale(Tensor& x, float s) override { inner_->scale(x, s); }
  void scale_logits(Tensor& logits, float scale, float softcap) override {
    inner_->scale_logits(logits, scale, softcap);
  }
  void write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) override {
    inner_->write_kv(k, v, slot_mapping, kv);
  }
  void attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta, const AttentionParams& params,
                 Tensor& out) override {
    inner_->attention(q, kv, meta, params, out);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override { inner_->gather_rows(x, rows, out); }
  void copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) override {
    inner_->copy_blocks(kv, pairs);
  }
  void moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) override {
    inner_->moe_route(router_logits, normalize, ids, weights);
  }
  void moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) override {
    inner_->moe_group(ids, offsets, row_tokens, assignment_rows);
  }
  void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y) override {
    observer_.on_expert_matmul(w, host_copy(x, x_), host_copy(offsets, offsets_));
    inner_->expert_matmul(w, x, offsets, y);
  }
  void moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) override {
    inner_->moe_combine(y, assignment_rows, weights, out);
  }
  void add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) override {
    inner_->add_sigmoid_gated(x, y, gate);
  }
  void sample(const Tensor& logits, const SamplingBatch& batch) override { inner_->sample(logits, batch); }

 private:
  // t's bytes copied to the host, viewed with t's shape.
  Tensor host_copy(const Tensor& t, std::vector<std::uint8_t>& storage) {
    storage.resize(t.bytes());
    inner_->copy_to_host(storage.data(), t, t.bytes());
    Tensor h = t;
    h.data = storage.data();
    h.device = Device::kCpu;
    return h;
  }

  std::unique_ptr<Backend> inner_;
  MatmulObserver& observer_;
  std::vector<std::uint8_t> x_, offsets_;  // host copies shown to the observer
};

}  // namespace folio
