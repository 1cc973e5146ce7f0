// ObservingBackend: a Backend that runs every op on another backend and shows
// each matmul's weight and a host copy of its input to an observer first.
// Calibration uses it to collect the activation statistics of every weight
// (offline/calibration.h) without the forward pass knowing, and tests count the
// bytes a step reads. The copies make it slow; it is for offline tools.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/forwarding_backend.h"

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

class ObservingBackend final : public ForwardingBackend {
 public:
  ObservingBackend(std::unique_ptr<Backend> inner, MatmulObserver& observer)
      : ForwardingBackend(std::move(inner)), observer_(observer) {}

  void matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) override {
    observer_.on_matmul(w, host_copy(x, x_));
    ForwardingBackend::matmul(w, x, y, bias);
  }
  // The grouped and fused matmuls as their plain parts, so that the observer
  // sees each weight with its input.
  void matmuls(const Tensor& x, std::span<const MatmulTarget> targets) override { Backend::matmuls(x, targets); }
  void glu_matmul(const Tensor& w, Tensor& gate, const Tensor& up, GluActivation act, Tensor& y) override {
    Backend::glu_matmul(w, gate, up, act, y);
  }
  void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y, const Tensor* bias) override {
    observer_.on_expert_matmul(w, host_copy(x, x_), host_copy(offsets, offsets_));
    ForwardingBackend::expert_matmul(w, x, offsets, y, bias);
  }

 private:
  // t's bytes copied to the host, viewed with t's shape.
  Tensor host_copy(const Tensor& t, std::vector<std::uint8_t>& storage) {
    storage.resize(t.bytes());
    inner().copy_to_host(storage.data(), t, t.bytes());
    Tensor h = t;
    h.data = storage.data();
    h.device = Device::kCpu;
    return h;
  }

  MatmulObserver& observer_;
  std::vector<std::uint8_t> x_, offsets_;  // host copies shown to the observer
};

}  // namespace folio
