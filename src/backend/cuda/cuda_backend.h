// CudaBackend: every op of the contract on one NVIDIA GPU, checked against
// the reference by the op suite. Memory is plain cudaMalloc (never managed),
// taken when buffers and weights are made; the work of a step is queued on
// one stream, and copy_to_host and synchronize are where the host waits
// (and where problems a kernel found in device data, such as a token id
// outside the vocabulary, are thrown). Weights stay in their GGUF blocks,
// which the kernels decode as they read them.
//
// Activations are f32 (exact to float reassociation, the default) or bf16
// (BackendOptions::activations), rounded where each op stores. Matmuls are
// batch-invariant by design: one kernel for every batch size, each output a
// fixed-order reduction; with batch_invariant off, products of more than
// kMaxInvariantRows rows go through cuBLAS instead (faster prefill, but a
// row's bits then depend on its batch). Scratch for sampling and the cuBLAS
// path grows to its high-water mark in the first steps, then stays.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"

struct CUstream_st;
struct CUevent_st;

namespace folio {

namespace cuda {
class CublasGemm;
class DeviceStatusWord;
}  // namespace cuda

// What one CUDA device holds, for the start-up budget line.
struct CudaMemoryUse {
  std::string device_name;
  std::uint64_t total_bytes = 0;    // the device's memory
  std::uint64_t free_bytes = 0;     // free now
  std::uint64_t weight_bytes = 0;   // load_weight copies
  std::uint64_t buffer_bytes = 0;   // allocate: KV pools, workspaces, step buffers
  std::uint64_t scratch_bytes = 0;  // the ops' own scratch
};

class CudaBackend final : public Backend {
 public:
  // Matmuls of more rows than this use cuBLAS when batch invariance is off.
  static constexpr std::int64_t kMaxInvariantRows = 8;

  // activations: F32 or BF16. Throws when no CUDA device is usable.
  explicit CudaBackend(DType activations = DType::F32, bool batch_invariant = true, int device = 0);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  DType activation_dtype() const override { return act_; }
  bool batch_invariant() const { return batch_invariant_; }
  // The device too: another GPU model may round differently.
  std::string numerics() const override {
    return "cuda " + std::string(folio::name(act_)) + (batch_invariant_ ? " batch-invariant " : " batch-variant ") +
           memory_use().device_name;
  }
  CudaMemoryUse memory_use() const;

  Buffer allocate(std::size_t bytes) override;
  Buffer allocate_host(std::size_t bytes) override;
  void copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override;
  void synchronize() override;
  QueuePoint queue_point() override;
  void wait_until(QueuePoint point) override;
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
  bool has_linear_attention() const override { return false; }
  void causal_conv1d(const Tensor& x, const Tensor& w, const AttentionMetadata& meta, const Tensor& state_slots,
                     RecurrentState& state, Tensor& out) override;
  void gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const DeltaRuleParams& params,
                        const AttentionMetadata& meta, const Tensor& state_slots, RecurrentState& state,
                        Tensor& out) override;
  void sample(const Tensor& logits, const SamplingBatch& batch) override;

 private:
  // Makes device_ the calling thread's current device.
  void bind() const;
  int kind_of(const Tensor& t) const;
  // Device scratch of at least `bytes`, kept between ops.
  void* scratch(std::size_t bytes);
  // Waits for the stream; throws on a CUDA error or a problem a kernel reported.
  void wait(const char* what);

  DType act_;
  bool batch_invariant_;
  int device_;
  CUstream_st* stream_ = nullptr;
  // Queue points are events on stream_, kQueueEvents of them reused in turn:
  // point p is recorded in events_[p % kQueueEvents], which a later point may
  // record again; waiting for that later one waits for p and more.
  static constexpr std::size_t kQueueEvents = 8;
  std::array<CUevent_st*, kQueueEvents> events_{};
  QueuePoint last_point_ = 0;
  std::unique_ptr<cuda::DeviceStatusWord> status_;
  std::unique_ptr<cuda::CublasGemm> cublas_;  // made on first use
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  std::uint64_t weight_bytes_ = 0;
  std::shared_ptr<std::uint64_t> buffer_bytes_;  // shared with the buffers' release
};

// Why no CUDA device can be used here ("no CUDA device", with what the
// runtime said), or empty when one can.
std::string cuda_device_problem();

}  // namespace folio
