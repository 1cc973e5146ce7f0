// SealedBackend: another (host) backend's ops over memory the host cannot
// read, as a GPU's is. Every pointer it hands out - buffers, weights, the KV
// pool, workspaces - is sealed: bit 55 set, an address no host page has, so
// that any host read or write through it faults at once. Its ops unseal the
// tensors they are given (and refuse host pointers, which a GPU could not
// read either), then run the inner backend; copy_to_device and copy_to_host
// are the only way across. The engine tests run on it: a crash there is host
// code reading device memory. It also counts the bytes that cross.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace folio {

struct CrossingCounts {
  std::uint64_t to_device_bytes = 0;
  std::uint64_t to_host_bytes = 0;
  std::uint64_t to_device_copies = 0;
  std::uint64_t to_host_copies = 0;
};

class SealedBackend final : public Backend {
 public:
  explicit SealedBackend(std::unique_ptr<Backend> inner);

  std::string name() const override { return "sealed"; }
  Device device() const override { return Device::kSealed; }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  std::string numerics() const override { return "sealed " + inner_->numerics(); }
  const Backend& inner() const { return *inner_; }
  // What crossed between host and device so far.
  const CrossingCounts& crossings() const { return crossings_; }

  Buffer allocate(std::size_t bytes) override;
  Buffer allocate_host(std::size_t bytes) override { return inner_->allocate_host(bytes); }
  void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override;
  void synchronize() override { inner_->synchronize(); }
  Buffer load_weight(Tensor& w) override;

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
  void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y) override;
  void moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) override;
  void add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) override;
  void sample(const Tensor& logits, const SamplingBatch& batch) override;

 private:
  std::unique_ptr<Backend> inner_;
  CrossingCounts crossings_;
};

}  // namespace folio
