#include "backend/sealed/sealed_backend.h"

#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"

namespace folio {
namespace {

// Bit 55 is above every host address (user space ends below 2^47, or 2^56
// with five-level paging for mappings that ask for it) and below the top
// byte that some processors ignore, so a sealed pointer never reaches a page.
constexpr std::uintptr_t kSealBit = std::uintptr_t{1} << 55;

void* seal(void* p) { return p == nullptr ? p : reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) | kSealBit); }

Tensor sealed(Tensor t) {
  t.data = seal(t.data);
  t.device = Device::kSealed;
  return t;
}

// The tensor as the inner backend sees it; a tensor that is not sealed is
// host memory handed to a device op, which a GPU could not read.
Tensor open(const Tensor& t, const char* what) {
  if (t.data == nullptr || t.numel() == 0) {
    Tensor u = t;
    u.data = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(t.data) & ~kSealBit);
    u.device = Device::kCpu;
    return u;
  }
  const auto bits = reinterpret_cast<std::uintptr_t>(t.data);
  if ((bits & kSealBit) == 0 || t.device != Device::kSealed)
    fail("sealed backend: {} {} is host memory, not the device's; make device tensors with allocate and "
         "copy_to_device",
         what, t.shape_string());
  Tensor u = t;
  u.data = reinterpret_cast<void*>(bits & ~kSealBit);
  u.device = Device::kCpu;
  return u;
}

KvPool open(const KvPool& p) {
  KvPool u = p;
  u.codes = open(p.codes, "KV codes");
  if (p.scales.data != nullptr) u.scales = open(p.scales, "KV scales");
  return u;
}

PagedKv open(const PagedKv& kv) {
  PagedKv u = kv;
  u.k = open(kv.k);
  u.v = open(kv.v);
  return u;
}

AttentionMetadata open(const AttentionMetadata& m) {
  AttentionMetadata u = m;
  u.positions = open(m.positions, "positions");
  u.slot_mapping = open(m.slot_mapping, "slot_mapping");
  u.query_start = open(m.query_start, "query_start");
  u.seq_lens = open(m.seq_lens, "seq_lens");
  u.block_tables = open(m.block_tables, "block_tables");
  return u;
}

}  // namespace

SealedBackend::SealedBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {
  FOLIO_CHECK(inner_->device() == Device::kCpu);
}

Buffer SealedBackend::allocate(std::size_t bytes) {
  auto real = std::make_shared<Buffer>(inner_->allocate(bytes));
  return Buffer(seal(real->data()), real->size(), Device::kSealed, [real]() mutable { real.reset(); });
}

void SealedBackend::copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) {
  crossings_.to_device_bytes += bytes;
  ++crossings_.to_device_copies;
  inner_->copy_to_device(open(dst, "copy_to_device's destination"), src, bytes);
}

void SealedBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
  crossings_.to_host_bytes += bytes;
  ++crossings_.to_host_copies;
  inner_->copy_to_host(dst, open(src, "copy_to_host's source"), bytes);
}

// The inner backend's copy (its own layout), or, where it would read the
// host memory w came in, a copy of those bytes; sealed either way.
Buffer SealedBackend::load_weight(Tensor& w) {
  if (w.device != Device::kCpu) fail("sealed backend: weight {} must come from host memory", w.shape_string());
  Buffer own = inner_->load_weight(w);
  if (own.empty()) {
    own = inner_->allocate(w.bytes());
    std::memcpy(own.data(), w.data, w.bytes());
    w.data = own.data();
  }
  auto real = std::make_shared<Buffer>(std::move(own));
  w = sealed(w);
  return Buffer(seal(real->data()), real->size(), Device::kSealed, [real]() mutable { real.reset(); });
}

void SealedBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  Tensor o = open(out, "embedding's output");
  inner_->embedding(open(table, "embedding table"), open(ids, "token ids"), o);
}

void SealedBackend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  Tensor yo = open(y, "matmul's output");
  Tensor b = bias ? open(*bias, "bias") : Tensor();
  inner_->matmul(open(w, "weight"), open(x, "matmul's input"), yo, bias ? &b : nullptr);
}

void SealedBackend::matmuls(const Tensor& x, std::span<const MatmulTarget> targets) {
  std::vector<Tensor> opened;  // w, y and bias of each target, in that order
  opened.reserve(targets.size() * 3);
  std::vector<MatmulTarget> inner;
  for (const MatmulTarget& t : targets) {
    opened.push_back(open(*t.w, "weight"));
    opened.push_back(open(*t.y, "matmul's output"));
    opened.push_back(t.bias ? open(*t.bias, "bias") : Tensor());
  }
  for (std::size_t i = 0; i < targets.size(); ++i)
    inner.push_back({&opened[3 * i], &opened[3 * i + 1], targets[i].bias ? &opened[3 * i + 2] : nullptr});
  inner_->matmuls(open(x, "matmul's input"), inner);
}

void SealedBackend::glu_matmul(const Tensor& w, Tensor& gate, const Tensor& up, GluActivation act, Tensor& y) {
  Tensor g = open(gate, "gate"), yo = open(y, "matmul's output");
  inner_->glu_matmul(open(w, "weight"), g, open(up, "up"), act, yo);
}

void SealedBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  Tensor o = open(out, "rms_norm's output");
  inner_->rms_norm(open(x, "rms_norm's input"), open(w, "norm weight"), eps, o);
}

void SealedBackend::rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  Tensor xo = open(x, "rope's input");
  RopeTable t = table;
  t.inv_freq = open(table.inv_freq, "rotary table");
  inner_->rope(xo, open(positions, "positions"), t);
}

void SealedBackend::glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  Tensor o = open(out, "glu's output");
  inner_->glu(open(gate, "gate"), open(up, "up"), act, o);
}

void SealedBackend::add(Tensor& x, const Tensor& y) {
  Tensor xo = open(x, "add's output");
  inner_->add(xo, open(y, "add's input"));
}

void SealedBackend::scale(Tensor& x, float s) {
  Tensor xo = open(x, "scale's input");
  inner_->scale(xo, s);
}

void SealedBackend::scale_logits(Tensor& logits, float scale, float softcap) {
  Tensor lo = open(logits, "logits");
  inner_->scale_logits(lo, scale, softcap);
}

void SealedBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) {
  PagedKv c = open(kv);
  inner_->write_kv(open(k, "keys"), open(v, "values"), open(slot_mapping, "slot_mapping"), c);
}

void SealedBackend::attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                              const AttentionParams& params, Tensor& out) {
  Tensor o = open(out, "attention's output");
  inner_->attention(open(q, "queries"), open(kv), open(meta), params, o);
}

void SealedBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  Tensor o = open(out, "gather_rows' output");
  inner_->gather_rows(open(x, "gather_rows' input"), open(rows, "rows"), o);
}

void SealedBackend::copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) {
  PagedKv c = open(kv);
  inner_->copy_blocks(c, pairs);
}

void SealedBackend::moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) {
  Tensor i = open(ids, "expert ids"), w = open(weights, "routing weights");
  inner_->moe_route(open(router_logits, "router logits"), normalize, i, w);
}

void SealedBackend::moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) {
  Tensor o = open(offsets, "offsets"), r = open(row_tokens, "row tokens"), a = open(assignment_rows, "assignment rows");
  inner_->moe_group(open(ids, "expert ids"), o, r, a);
}

void SealedBackend::expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y) {
  Tensor yo = open(y, "expert_matmul's output");
  inner_->expert_matmul(open(w, "expert weights"), open(x, "expert rows"), open(offsets, "offsets"), yo);
}

void SealedBackend::moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) {
  Tensor o = open(out, "moe_combine's output");
  inner_->moe_combine(open(y, "expert outputs"), open(assignment_rows, "assignment rows"),
                      open(weights, "routing weights"), o);
}

void SealedBackend::add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) {
  Tensor xo = open(x, "add_sigmoid_gated's output");
  inner_->add_sigmoid_gated(xo, open(y, "shared expert output"), open(gate, "gate"));
}

void SealedBackend::sample(const Tensor& logits, const SamplingBatch& batch) {
  SamplingBatch b = batch;
  b.rows = open(batch.rows, "sampling rows");
  b.adjustments = open(batch.adjustments, "logit adjustments");
  b.results = open(batch.results, "sampling results");
  b.logprobs = open(batch.logprobs, "logprob results");
  b.masks = open(batch.masks, "token masks");
  inner_->sample(open(logits, "logits"), b);
}

}  // namespace folio
