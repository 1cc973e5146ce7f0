#include "backend/forwarding_backend.h"

#include <utility>
#include <vector>

namespace folio {

ForwardingBackend::ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

PagedKv ForwardingBackend::view_kv(const PagedKv& kv) {
  PagedKv u = kv;
  u.k.codes = view(kv.k.codes, "the K cache");
  u.k.scales = view(kv.k.scales, "the K cache's scales");
  u.v.codes = view(kv.v.codes, "the V cache");
  u.v.scales = view(kv.v.scales, "the V cache's scales");
  return u;
}

void ForwardingBackend::copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) {
  inner_->copy_to_device(view(dst, "copy_to_device's destination"), src, bytes);
}

void ForwardingBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
  inner_->copy_to_host(dst, view(src, "copy_to_host's source"), bytes);
}

void ForwardingBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  issue([this, table = view(table, "embedding table"), ids = view(ids, "token ids"),
         out = view(out, "embedding's output")]() mutable { inner_->embedding(table, ids, out); });
}

void ForwardingBackend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  const bool has_bias = bias != nullptr;
  issue([this, w = view(w, "weight"), x = view(x, "matmul's input"), y = view(y, "matmul's output"),
         b = has_bias ? view(*bias, "bias") : Tensor(), has_bias]() mutable {
    inner_->matmul(w, x, y, has_bias ? &b : nullptr);
  });
}

void ForwardingBackend::matmuls(const Tensor& x, std::span<const MatmulTarget> targets) {
  std::vector<Tensor> tensors;  // w, y and bias of each target, in that order
  std::vector<bool> has_bias;
  tensors.reserve(targets.size() * 3);
  for (const MatmulTarget& t : targets) {
    tensors.push_back(view(*t.w, "weight"));
    tensors.push_back(view(*t.y, "matmul's output"));
    tensors.push_back(t.bias ? view(*t.bias, "bias") : Tensor());
    has_bias.push_back(t.bias != nullptr);
  }
  issue([this, x = view(x, "matmul's input"), tensors = std::move(tensors), has_bias = std::move(has_bias)]() mutable {
    std::vector<MatmulTarget> inner;
    for (std::size_t i = 0; i < has_bias.size(); ++i)
      inner.push_back({&tensors[3 * i], &tensors[3 * i + 1], has_bias[i] ? &tensors[3 * i + 2] : nullptr});
    inner_->matmuls(x, inner);
  });
}

void ForwardingBackend::glu_matmul(const Tensor& w, Tensor& gate, const Tensor& up, GluActivation act, Tensor& y) {
  issue([this, w = view(w, "weight"), gate = view(gate, "gate"), up = view(up, "up"), act,
         y = view(y, "matmul's output")]() mutable { inner_->glu_matmul(w, gate, up, act, y); });
}

void ForwardingBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  issue([this, x = view(x, "rms_norm's input"), w = view(w, "norm weight"), eps,
         out = view(out, "rms_norm's output")]() mutable { inner_->rms_norm(x, w, eps, out); });
}

void ForwardingBackend::rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  RopeTable t = table;
  t.inv_freq = view(table.inv_freq, "rotary table");
  issue([this, x = view(x, "rope's input"), positions = view(positions, "positions"), t]() mutable {
    inner_->rope(x, positions, t);
  });
}

void ForwardingBackend::glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  issue([this, gate = view(gate, "gate"), up = view(up, "up"), act, out = view(out, "glu's output")]() mutable {
    inner_->glu(gate, up, act, out);
  });
}

void ForwardingBackend::add(Tensor& x, const Tensor& y) {
  issue([this, x = view(x, "add's output"), y = view(y, "add's input")]() mutable { inner_->add(x, y); });
}

void ForwardingBackend::scale(Tensor& x, float s) {
  issue([this, x = view(x, "scale's input"), s]() mutable { inner_->scale(x, s); });
}

void ForwardingBackend::scale_logits(Tensor& logits, float scale, float softcap) {
  issue([this, logits = view(logits, "logits"), scale, softcap]() mutable {
    inner_->scale_logits(logits, scale, softcap);
  });
}

void ForwardingBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) {
  issue([this, k = view(k, "keys"), v = view(v, "values"), slots = view(slot_mapping, "slot_mapping"),
         kv = view_kv(kv)]() mutable { inner_->write_kv(k, v, slots, kv); });
}

void ForwardingBackend::attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                                  const AttentionParams& params, Tensor& out) {
  const AttentionMetadata m = view_meta(meta);
  AttentionParams p = params;
  if (params.sinks.data != nullptr) p.sinks = view(params.sinks, "attention sinks");
  issue([this, q = view(q, "queries"), kv = view_kv(kv), m, params = p, out = view(out, "attention's output")]() mutable {
    inner_->attention(q, kv, m, params, out);
  });
}

void ForwardingBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  issue([this, x = view(x, "gather_rows' input"), rows = view(rows, "rows"),
         out = view(out, "gather_rows' output")]() mutable { inner_->gather_rows(x, rows, out); });
}

void ForwardingBackend::copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) {
  issue([this, kv = view_kv(kv), pairs = std::vector(pairs.begin(), pairs.end())]() mutable {
    inner_->copy_blocks(kv, pairs);
  });
}

void ForwardingBackend::moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) {
  issue([this, logits = view(router_logits, "router logits"), normalize, ids = view(ids, "expert ids"),
         weights = view(weights, "routing weights")]() mutable { inner_->moe_route(logits, normalize, ids, weights); });
}

void ForwardingBackend::moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) {
  issue([this, ids = view(ids, "expert ids"), offsets = view(offsets, "offsets"),
         row_tokens = view(row_tokens, "row tokens"),
         assignment_rows = view(assignment_rows, "assignment rows")]() mutable {
    inner_->moe_group(ids, offsets, row_tokens, assignment_rows);
  });
}

void ForwardingBackend::expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y,
                                      const Tensor* bias) {
  const bool has_bias = bias != nullptr;
  issue([this, w = view(w, "expert weights"), x = view(x, "expert rows"), offsets = view(offsets, "offsets"),
         y = view(y, "expert_matmul's output"), b = has_bias ? view(*bias, "expert bias") : Tensor(),
         has_bias]() mutable { inner_->expert_matmul(w, x, offsets, y, has_bias ? &b : nullptr); });
}

void ForwardingBackend::moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights,
                                    Tensor& out) {
  issue([this, y = view(y, "expert outputs"), rows = view(assignment_rows, "assignment rows"),
         weights = view(weights, "routing weights"), out = view(out, "moe_combine's output")]() mutable {
    inner_->moe_combine(y, rows, weights, out);
  });
}

void ForwardingBackend::moe_route_grouped(const Tensor& router_logits, const Tensor* selection_bias,
                                          const GroupedRouting& routing, Tensor& ids, Tensor& weights) {
  const bool has_bias = selection_bias != nullptr;
  issue([this, logits = view(router_logits, "router logits"),
         bias = has_bias ? view(*selection_bias, "selection bias") : Tensor(), has_bias, routing,
         ids = view(ids, "expert ids"), weights = view(weights, "routing weights")]() mutable {
    inner_->moe_route_grouped(logits, has_bias ? &bias : nullptr, routing, ids, weights);
  });
}

void ForwardingBackend::concat_cols(const Tensor& a, const Tensor& b, Tensor& out) {
  issue([this, a = view(a, "concat_cols's first input"), b = view(b, "concat_cols's second input"),
         out = view(out, "concat_cols's output")]() mutable { inner_->concat_cols(a, b, out); });
}

void ForwardingBackend::add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) {
  issue([this, x = view(x, "add_sigmoid_gated's output"), y = view(y, "shared expert output"),
         gate = view(gate, "gate")]() mutable { inner_->add_sigmoid_gated(x, y, gate); });
}

void ForwardingBackend::causal_conv1d(const Tensor& x, const Tensor& w, const AttentionMetadata& meta,
                                      const Tensor& state_slots, RecurrentState& state, Tensor& out) {
  issue([this, x = view(x, "causal_conv1d's input"), w = view(w, "convolution weights"), meta = view_meta(meta),
         slots = view(state_slots, "state slots"), state = view_state(state),
         out = view(out, "causal_conv1d's output")]() mutable {
    inner_->causal_conv1d(x, w, meta, slots, state, out);
  });
}

void ForwardingBackend::gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b,
                                         const DeltaRuleParams& params, const AttentionMetadata& meta,
                                         const Tensor& state_slots, RecurrentState& state, Tensor& out) {
  DeltaRuleParams p = params;
  p.decay = view(params.decay, "delta rule decay");
  p.dt_bias = view(params.dt_bias, "delta rule dt_bias");
  issue([this, qkv = view(qkv, "delta rule qkv"), a = view(a, "delta rule a"), b = view(b, "delta rule b"), p,
         meta = view_meta(meta), slots = view(state_slots, "state slots"), state = view_state(state),
         out = view(out, "gated_delta_rule's output")]() mutable {
    inner_->gated_delta_rule(qkv, a, b, p, meta, slots, state, out);
  });
}

AttentionMetadata ForwardingBackend::view_meta(const AttentionMetadata& meta) {
  AttentionMetadata m = meta;
  m.positions = view(meta.positions, "positions");
  m.slot_mapping = view(meta.slot_mapping, "slot_mapping");
  m.query_start = view(meta.query_start, "query_start");
  m.seq_lens = view(meta.seq_lens, "seq_lens");
  m.block_tables = view(meta.block_tables, "block_tables");
  return m;
}

RecurrentState ForwardingBackend::view_state(const RecurrentState& state) {
  return {view(state.conv, "convolution window"), view(state.state, "recurrent state")};
}

void ForwardingBackend::sample(const Tensor& logits, const SamplingBatch& batch) {
  SamplingBatch b = batch;
  b.rows = view(batch.rows, "sampling rows");
  b.adjustments = view(batch.adjustments, "logit adjustments");
  b.results = view(batch.results, "sampling results");
  b.logprobs = view(batch.logprobs, "logprob results");
  b.masks = view(batch.masks, "token masks");
  issue([this, logits = view(logits, "logits"), b]() { inner_->sample(logits, b); });
}

}  // namespace folio
