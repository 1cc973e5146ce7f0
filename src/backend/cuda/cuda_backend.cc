#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "backend/cuda/cublas_gemm.h"
#include "backend/cuda/device_status.h"
#include "backend/cuda/glu_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/op_checks.h"
#include "core/error.h"

namespace folio {
namespace {

using cuda::kActBf16;
using cuda::kActF32;

static_assert(static_cast<int>(GluActivation::kSilu) == cuda::kGluSilu &&
              static_cast<int>(GluActivation::kGeluTanh) == cuda::kGluGeluTanh &&
              static_cast<int>(GluActivation::kSwigluClamped) == cuda::kGluSwigluClamped &&
              static_cast<int>(GluActivation::kSigmoid) == cuda::kGluSigmoid);
static_assert(kSwigluClampedAlpha == cuda::kSwigluAlpha && kSwigluClampedLimit == cuda::kSwigluLimit);

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA {} failed: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

// A tensor an op reads or writes must be the device's (a GPU cannot read
// host memory); empty tensors may point anywhere.
const Tensor& on_device(const Tensor& t, const char* what) {
  if (t.numel() > 0 && t.device != Device::kCuda)
    fail("cuda backend: {} {} is host memory, not the GPU's; make device tensors with allocate and copy_to_device",
         what, t.shape_string());
  return t;
}

template <typename T>
const T* ints(const Tensor& t, const char* what) {
  return static_cast<const T*>(on_device(t, what).data);
}

void check_weight_type(const Tensor& w, const char* op) {
  switch (w.dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
    case DType::MXFP4:
    case DType::NVFP4:
      break;
    default:
      fail(
          "cuda backend: {} of {} weights is not supported (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, "
          "q2_k .. q6_k, iq4_nl, iq4_xs, mxfp4 and nvfp4 are); requantize the model with folio quantize",
          op, name(w.dtype));
  }
  if (w.layout != Layout::kGguf) fail("cuda backend: {} weights must be in GGUF's block order", op);
}

// cudaMalloc, or an Error that says how much was free and what to do.
void* device_malloc(std::size_t bytes, const char* what, const std::string& advice) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) == cudaSuccess) return p;
  cudaGetLastError();
  std::size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  fail("out of GPU memory allocating {} of {} bytes ({} of {} free); {}", what, bytes, free_bytes, total_bytes, advice);
}

cuda::KvPoolArgs pool_args(const KvPool& p, const char* what) {
  cuda::KvPoolArgs a;
  a.codes = on_device(p.codes, what).data;
  a.scales = p.row_scales() > 0 ? static_cast<std::uint16_t*>(on_device(p.scales, what).data) : nullptr;
  a.type = static_cast<int>(p.type);
  a.dim = static_cast<int>(p.dim);
  a.row_bytes = p.row_bytes();
  a.row_scales = p.row_scales();
  return a;
}

}  // namespace

std::string cuda_device_problem() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return fmt::format("no CUDA device: {} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
  if (count == 0) return "no CUDA device: the driver sees none";
  return {};
}

CudaBackend::CudaBackend(DType activations, bool batch_invariant, int device)
    : act_(activations),
      batch_invariant_(batch_invariant),
      device_(device),
      buffer_bytes_(std::make_shared<std::uint64_t>(0)) {
  if (act_ != DType::F32 && act_ != DType::BF16)
    fail("the cuda backend's activations are f32 or bf16, not {}", folio::name(act_));
  if (const std::string problem = cuda_device_problem(); !problem.empty())
    fail("cannot use the cuda backend: {}; use --backend cpu", problem);
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  status_ = std::make_unique<cuda::DeviceStatusWord>();
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  cublas_.reset();
  if (scratch_ != nullptr) cudaFree(scratch_);
  for (CUevent_st* e : events_)
    if (e != nullptr) cudaEventDestroy(e);
  cudaStreamDestroy(stream_);
}

CudaMemoryUse CudaBackend::memory_use() const {
  bind();
  CudaMemoryUse u;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device_) == cudaSuccess) u.device_name = prop.name;
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    u.free_bytes = free_bytes;
    u.total_bytes = total_bytes;
  }
  u.weight_bytes = weight_bytes_;
  u.buffer_bytes = *buffer_bytes_;
  u.scratch_bytes = scratch_bytes_;
  return u;
}

// CUDA's current device belongs to the calling host thread, and the engine
// calls from its own thread, not the one that made the backend: each entry
// point makes device_ current where it runs (a stream, a cuBLAS handle and
// cudaMalloc all act on the current device).
void CudaBackend::bind() const {
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != device_) check(cudaSetDevice(device_), "cudaSetDevice");
}

int CudaBackend::kind_of(const Tensor& t) const { return t.dtype == DType::BF16 ? kActBf16 : kActF32; }

void CudaBackend::wait(const char* what) {
  const cudaError_t e = cudaStreamSynchronize(stream_);
  if (e != cudaSuccess)
    fail(
        "CUDA error while the GPU ran the queued ops ({}): {} ({}); the device context cannot be used again, "
        "restart the process",
        what, cudaGetErrorString(e), cudaGetErrorName(e));
  status_->check();
}

void* CudaBackend::scratch(std::size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  if (scratch_ != nullptr) {
    wait("scratch growth");
    cudaFree(scratch_);
    scratch_ = nullptr;
    scratch_bytes_ = 0;
  }
  scratch_ = device_malloc(bytes, "the ops' scratch", "lower --max-num-seqs");
  scratch_bytes_ = bytes;
  return scratch_;
}

Buffer CudaBackend::allocate(std::size_t bytes) {
  bind();
  if (bytes == 0) return {};
  void* p = device_malloc(bytes, "a buffer", "lower --kv-cache-memory or --max-num-batched-tokens");
  check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
  *buffer_bytes_ += bytes;
  auto counter = buffer_bytes_;
  return Buffer(p, bytes, Device::kCuda, [p, bytes, counter, device = device_] {
    cudaSetDevice(device);
    cudaFree(p);
    *counter -= bytes;
  });
}

Buffer CudaBackend::allocate_host(std::size_t bytes) {
  bind();
  if (bytes == 0) return {};
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) != cudaSuccess) {
    cudaGetLastError();
    fail("cannot allocate {} bytes of pinned host memory", bytes);
  }
  std::memset(p, 0, bytes);
  return Buffer(p, bytes, Device::kCpu, [p, device = device_] {
    cudaSetDevice(device);
    cudaFreeHost(p);
  });
}

void CudaBackend::copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) {
  bind();
  FOLIO_CHECK(bytes <= dst.bytes());
  if (bytes == 0) return;
  on_device(dst, "copy_to_device destination");
  check(cudaMemcpyAsync(dst.data, src, bytes, cudaMemcpyHostToDevice, stream_), "copy to the device");
}

void CudaBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
  bind();
  FOLIO_CHECK(bytes <= src.bytes());
  if (bytes > 0) {
    on_device(src, "copy_to_host source");
    check(cudaMemcpyAsync(dst, src.data, bytes, cudaMemcpyDeviceToHost, stream_), "copy to the host");
  }
  wait("copy_to_host");
}

void CudaBackend::synchronize() {
  bind();
  wait("synchronize");
}

QueuePoint CudaBackend::queue_point() {
  bind();
  const QueuePoint point = ++last_point_;
  CUevent_st*& e = events_[point % kQueueEvents];
  if (e == nullptr) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(e, stream_), "cudaEventRecord");
  return point;
}

void CudaBackend::wait_until(QueuePoint point) {
  if (point == 0) return;
  bind();
  const cudaError_t e = cudaEventSynchronize(events_[point % kQueueEvents]);
  if (e != cudaSuccess)
    fail("CUDA error while the GPU ran the queued ops (a queue point): {} ({}); the device context cannot be used "
         "again, restart the process",
         cudaGetErrorString(e), cudaGetErrorName(e));
}

Buffer CudaBackend::load_weight(Tensor& w) {
  bind();
  FOLIO_CHECK(w.device == Device::kCpu && w.layout == Layout::kGguf);
  const std::size_t bytes = w.bytes();
  if (bytes == 0) return {};
  void* p = device_malloc(bytes, "a weight", fmt::format("{} bytes of weights are loaded so far", weight_bytes_));
  // On the backend's stream, so that every kernel after it is ordered after
  // it (a plain cudaMemcpy runs on the legacy default stream, which the
  // non-blocking stream_ does not wait for). From pageable memory the call
  // returns once the source is read: the mapped file may go.
  check(cudaMemcpyAsync(p, w.data, bytes, cudaMemcpyHostToDevice, stream_), "weight upload");
  w.data = p;
  w.device = Device::kCuda;
  weight_bytes_ += bytes;
  return Buffer(p, bytes, Device::kCuda, [p, device = device_] {
    cudaSetDevice(device);
    cudaFree(p);
  });
}

void CudaBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  bind();
  op_checks::embedding(table, ids, out, act_);
  check_weight_type(table, "embedding");
  cuda::EmbeddingLaunch a;
  a.type = table.dtype;
  a.table = on_device(table, "embedding table").data;
  a.row_bytes = static_cast<std::int64_t>(table.row_bytes());
  a.vocab = table.rows();
  a.dim = table.cols();
  a.ids = ints<std::int32_t>(ids, "embedding ids");
  a.n = ids.numel();
  a.out = on_device(out, "embedding out").data;
  a.out_kind = kind_of(out);
  a.status = status_->device();
  cuda::launch_embedding(a, stream_);
}

void CudaBackend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  bind();
  op_checks::matmul(w, x, y, bias, act_);
  check_weight_type(w, "matmul");
  on_device(w, "matmul weights");
  on_device(x, "matmul x");
  on_device(y, "matmul y");
  if (bias != nullptr) on_device(*bias, "matmul bias");
  if (!batch_invariant_ && x.rows() > kMaxInvariantRows) {
    if (!cublas_) cublas_ = std::make_unique<cuda::CublasGemm>(stream_);
    cublas_->run(w, x, kind_of(x), y, kind_of(y), bias);
    return;
  }
  cuda::MatmulLaunch a;
  a.wtype = w.dtype;
  a.w = w.data;
  a.w_row_bytes = static_cast<std::int64_t>(w.row_bytes());
  a.m = w.rows();
  a.k = w.cols();
  a.x = x.data;
  a.x_kind = kind_of(x);
  a.n = x.rows();
  a.y = y.data;
  a.y_kind = kind_of(y);
  a.y_stride = y.cols();
  a.bias = bias != nullptr ? bias->as<const float>() : nullptr;
  a.status = status_->device();
  cuda::launch_matmul(a, stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  bind();
  op_checks::rms_norm(x, w, out, act_);
  cuda::launch_rms_norm(on_device(x, "rms_norm x").data, static_cast<const float*>(on_device(w, "rms_norm w").data),
                        eps, on_device(out, "rms_norm out").data, kind_of(x), x.rows(), x.cols(), stream_);
}

void CudaBackend::rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  bind();
  op_checks::rope(x, positions, table, act_);
  cuda::launch_rope(on_device(x, "rope x").data, kind_of(x), ints<std::int32_t>(positions, "rope positions"),
                    static_cast<const float*>(on_device(table.inv_freq, "rope table").data), x.shape[0], x.shape[1],
                    x.shape[2], table.dim, table.neox, table.attention_factor,
                    {table.temperature_beta, table.temperature_offset, table.temperature_length}, stream_);
}

void CudaBackend::glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  bind();
  op_checks::same_shape(gate, up, act_, "glu");
  op_checks::same_shape(gate, out, act_, "glu");
  cuda::launch_glu(on_device(gate, "glu gate").data, on_device(up, "glu up").data, on_device(out, "glu out").data,
                   kind_of(gate), gate.numel(), static_cast<int>(act), stream_);
}

void CudaBackend::add(Tensor& x, const Tensor& y) {
  bind();
  op_checks::same_shape(x, y, act_, "add");
  cuda::launch_add(on_device(x, "add x").data, on_device(y, "add y").data, kind_of(x), x.numel(), stream_);
}

void CudaBackend::scale(Tensor& x, float s) {
  bind();
  op_checks::activations(x, act_, "scale");
  cuda::launch_scale(on_device(x, "scale x").data, kind_of(x), x.numel(), s, stream_);
}

void CudaBackend::scale_logits(Tensor& logits, float scale, float softcap) {
  op_checks::scale_logits(logits, scale, softcap);
  cuda::launch_scale_logits(static_cast<float*>(on_device(logits, "scale_logits logits").data), logits.numel(), scale,
                            softcap, stream_);
}

void CudaBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) {
  bind();
  op_checks::write_kv(k, v, slot_mapping, kv, act_);
  cuda::WriteKvLaunch a;
  a.k = on_device(k, "write_kv k").data;
  a.v = on_device(v, "write_kv v").data;
  a.kind = kind_of(k);
  a.slots = ints<std::int32_t>(slot_mapping, "write_kv slot_mapping");
  a.num_tokens = k.shape[0];
  a.kv_heads = kv.num_kv_heads();
  a.block_size = kv.block_size;
  a.num_slots = kv.num_blocks() * kv.block_size;
  a.kp = pool_args(kv.k, "the K cache");
  a.vp = pool_args(kv.v, "the V cache");
  a.status = status_->device();
  cuda::launch_write_kv(a, stream_);
}

void CudaBackend::attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                            const AttentionParams& params, Tensor& out) {
  bind();
  op_checks::attention(q, kv, meta, params, out, act_);
  if (kv.head_dim() > cuda::kMaxAttentionHeadDim || kv.value_head_dim() > cuda::kMaxAttentionHeadDim)
    fail("cuda backend: attention holds heads of up to {} numbers, not {} (K) and {} (V)", cuda::kMaxAttentionHeadDim,
         kv.head_dim(), kv.value_head_dim());
  if (q.shape[0] > 0 && meta.num_seqs <= 0) fail("cuda backend: attention of {} tokens in no sequence", q.shape[0]);
  cuda::AttentionLaunch a;
  a.q = on_device(q, "attention q").data;
  a.out = on_device(out, "attention out").data;
  a.kind = kind_of(q);
  a.num_tokens = q.shape[0];
  a.heads = q.shape[1];
  a.kv_heads = kv.num_kv_heads();
  a.head_dim = kv.head_dim();
  a.value_head_dim = kv.value_head_dim();
  a.positions = ints<std::int32_t>(meta.positions, "attention positions");
  a.query_start = ints<std::int32_t>(meta.query_start, "attention query_start");
  a.seq_lens = ints<std::int32_t>(meta.seq_lens, "attention seq_lens");
  a.block_tables = ints<std::int32_t>(meta.block_tables, "attention block_tables");
  a.num_seqs = meta.num_seqs;
  a.max_blocks = meta.max_blocks_per_seq;
  a.k = pool_args(kv.k, "the K cache");
  a.v = pool_args(kv.v, "the V cache");
  a.block_size = kv.block_size;
  a.num_blocks = kv.num_blocks();
  a.scale = params.scale;
  a.window = params.sliding_window;
  a.softcap = params.softcap;
  if (params.sinks.data != nullptr) a.sinks = static_cast<const float*>(on_device(params.sinks, "attention sinks").data);
  a.status = status_->device();
  cuda::launch_attention(a, stream_);
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  bind();
  op_checks::gather_rows(x, rows, out);
  cuda::launch_gather_rows(on_device(x, "gather_rows x").data, static_cast<std::int64_t>(x.row_bytes()), x.rows(),
                           ints<std::int32_t>(rows, "gather_rows rows"), rows.numel(),
                           on_device(out, "gather_rows out").data, status_->device(), stream_);
}

void CudaBackend::copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) {
  bind();
  op_checks::paged_kv(kv, "copy_blocks");
  for (auto [src, dst] : pairs) {
    if (src < 0 || src >= kv.num_blocks() || dst < 0 || dst >= kv.num_blocks())
      fail("copy_blocks: block pair ({}, {}) is outside the cache's {} blocks", src, dst, kv.num_blocks());
    for (const KvPool* p : {&kv.k, &kv.v}) {
      const std::size_t rows = static_cast<std::size_t>(p->rows_per_block());
      const std::size_t code_bytes = rows * static_cast<std::size_t>(p->row_bytes());
      auto* codes = static_cast<char*>(on_device(p->codes, "KV codes").data);
      check(cudaMemcpyAsync(codes + dst * code_bytes, codes + src * code_bytes, code_bytes, cudaMemcpyDeviceToDevice,
                            stream_),
            "copy_blocks");
      if (p->row_scales() == 0) continue;
      const std::size_t scale_bytes = rows * static_cast<std::size_t>(p->row_scales()) * sizeof(std::uint16_t);
      auto* scales = static_cast<char*>(on_device(p->scales, "KV scales").data);
      check(cudaMemcpyAsync(scales + dst * scale_bytes, scales + src * scale_bytes, scale_bytes,
                            cudaMemcpyDeviceToDevice, stream_),
            "copy_blocks");
    }
  }
}

void CudaBackend::moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) {
  bind();
  op_checks::moe_route(router_logits, ids, weights, act_);
  cuda::launch_moe_route(on_device(router_logits, "moe_route logits").data, kind_of(router_logits),
                         router_logits.rows(), router_logits.cols(), ids.cols(), normalize,
                         static_cast<std::int32_t*>(on_device(ids, "moe_route ids").data),
                         static_cast<float*>(on_device(weights, "moe_route weights").data), stream_);
}

void CudaBackend::moe_route_grouped(const Tensor& router_logits, const Tensor* selection_bias,
                                    const GroupedRouting& routing, Tensor& ids, Tensor& weights) {
  bind();
  op_checks::moe_route_grouped(router_logits, selection_bias, routing, ids, weights, act_);
  const float* bias =
      selection_bias != nullptr ? static_cast<const float*>(on_device(*selection_bias, "moe_route_grouped bias").data)
                                : nullptr;
  cuda::launch_moe_route_grouped(on_device(router_logits, "moe_route_grouped logits").data, kind_of(router_logits),
                                 bias, router_logits.rows(), router_logits.cols(), ids.cols(), routing,
                                 static_cast<std::int32_t*>(on_device(ids, "moe_route_grouped ids").data),
                                 static_cast<float*>(on_device(weights, "moe_route_grouped weights").data), stream_);
}

void CudaBackend::concat_cols(const Tensor& a, const Tensor& b, Tensor& out) {
  bind();
  op_checks::concat_cols(a, b, out, act_);
  cuda::launch_concat_cols(on_device(a, "concat_cols a").data, a.cols(), on_device(b, "concat_cols b").data, b.cols(),
                           on_device(out, "concat_cols out").data, out.rows(), kind_of(out), stream_);
}

void CudaBackend::moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) {
  bind();
  op_checks::moe_group(ids, offsets, row_tokens, assignment_rows);
  cuda::launch_moe_group(ints<std::int32_t>(ids, "moe_group ids"), ids.numel(), ids.cols(), offsets.numel() - 1,
                         static_cast<std::int32_t*>(on_device(offsets, "moe_group offsets").data),
                         static_cast<std::int32_t*>(on_device(row_tokens, "moe_group row_tokens").data),
                         static_cast<std::int32_t*>(on_device(assignment_rows, "moe_group assignment_rows").data),
                         status_->device(), stream_);
}

void CudaBackend::expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y,
                                const Tensor* bias) {
  bind();
  op_checks::expert_matmul(w, x, offsets, y, bias, act_);
  check_weight_type(w, "expert_matmul");
  const auto* off = ints<std::int32_t>(offsets, "expert_matmul offsets");
  cuda::launch_check_expert_offsets(off, w.shape[0], x.rows(), status_->device(), stream_);
  cuda::MatmulLaunch a;
  a.wtype = w.dtype;
  a.w = on_device(w, "expert_matmul weights").data;
  a.w_row_bytes = static_cast<std::int64_t>(w.row_bytes());
  a.m = w.shape[1];
  a.k = w.shape[2];
  a.x = on_device(x, "expert_matmul x").data;
  a.x_kind = kind_of(x);
  a.n = x.rows();
  a.y = on_device(y, "expert_matmul y").data;
  a.y_kind = kind_of(y);
  a.y_stride = y.cols();
  a.offsets = off;
  a.num_experts = w.shape[0];
  if (bias != nullptr) a.bias = static_cast<const float*>(on_device(*bias, "expert_matmul bias").data);
  a.status = status_->device();
  cuda::launch_matmul(a, stream_);
}

void CudaBackend::moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) {
  bind();
  op_checks::moe_combine(y, assignment_rows, weights, out, act_);
  cuda::launch_moe_combine(on_device(y, "moe_combine y").data, y.rows(),
                           ints<std::int32_t>(assignment_rows, "moe_combine assignment_rows"),
                           ints<float>(weights, "moe_combine weights"), out.rows(), weights.cols(), out.cols(),
                           on_device(out, "moe_combine out").data, kind_of(out), status_->device(), stream_);
}

void CudaBackend::add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) {
  bind();
  op_checks::add_sigmoid_gated(x, y, gate, act_);
  cuda::launch_add_sigmoid_gated(on_device(x, "add_sigmoid_gated x").data, on_device(y, "add_sigmoid_gated y").data,
                                 on_device(gate, "add_sigmoid_gated gate").data, kind_of(x), x.rows(), x.cols(),
                                 stream_);
}

// Linear attention has no kernel yet (has_linear_attention: false): a hybrid
// model (Qwen3.5) is refused at load; a direct call is refused here.
void CudaBackend::causal_conv1d(const Tensor&, const Tensor&, const AttentionMetadata&, const Tensor&,
                                RecurrentState&, Tensor&) {
  fail("the CUDA backend has no linear-attention (gated DeltaNet) kernels yet; run this hybrid model with "
       "--backend cpu");
}

void CudaBackend::gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const DeltaRuleParams&,
                                   const AttentionMetadata&, const Tensor&, RecurrentState&, Tensor&) {
  fail("the CUDA backend has no linear-attention (gated DeltaNet) kernels yet; run this hybrid model with "
       "--backend cpu");
}

void CudaBackend::sample(const Tensor& logits, const SamplingBatch& batch) {
  bind();
  op_checks::sample(logits, batch);
  if (batch.num_rows == 0) return;
  const std::int64_t vocab = logits.cols();
  if (vocab == 0) fail("cannot sample from an empty row of logits: the model has no tokens");
  cuda::SampleLaunch a;
  a.logits = ints<float>(logits, "sample logits");
  a.logits_rows = logits.rows();
  a.vocab = vocab;
  a.rows = static_cast<const SamplingRowParams*>(on_device(batch.rows, "sample rows").data);
  a.num_rows = batch.num_rows;
  a.num_adjustments = static_cast<std::int64_t>(batch.adjustments.bytes() / sizeof(LogitAdjustment));
  a.adjustments = a.num_adjustments > 0
                      ? static_cast<const LogitAdjustment*>(on_device(batch.adjustments, "sample adjustments").data)
                      : nullptr;
  a.results = static_cast<SampleResult*>(on_device(batch.results, "sample results").data);
  a.num_logprob_rows = batch.num_logprob_rows;
  a.logprobs = batch.num_logprob_rows > 0
                   ? static_cast<LogprobResult*>(on_device(batch.logprobs, "sample logprobs").data)
                   : nullptr;
  a.num_masks = batch.num_masks;
  a.mask_words = batch.mask_words;
  a.masks = batch.num_masks > 0 ? static_cast<const std::uint32_t*>(on_device(batch.masks, "sample masks").data) : nullptr;
  const auto floats = static_cast<std::size_t>(batch.num_rows * cuda::kSampleScratchRows * vocab);
  a.scratch = static_cast<float*>(scratch(floats * sizeof(float)));
  a.status = status_->device();
  cuda::launch_sample(a, stream_);
}

}  // namespace folio
