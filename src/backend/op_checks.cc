#include "backend/op_checks.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace folio::op_checks {
namespace {

// Checks run on every op of every step: the message (and the shapes in it)
// is formatted only when a check fails.
#define FOLIO_NEED(ok, op, ...)                                                      \
  do {                                                                           \
    if (!(ok)) fail("backend op {}: {}", op, fmt::format(__VA_ARGS__));          \
  } while (false)

// "[3, 64] f16" for a message.
std::string desc(const Tensor& t) { return fmt::format("{} {}", t.shape_string(), name(t.dtype)); }

}  // namespace

void activations(const Tensor& x, DType act, const char* op) {
  FOLIO_NEED(x.dtype == act, op, "{} must be {}, the backend's activation type", desc(x), name(act));
}

void embedding(const Tensor& table, const Tensor& ids, const Tensor& out, DType act) {
  FOLIO_NEED(ids.dtype == DType::I32, "embedding", "ids {} must be i32", desc(ids));
  activations(out, act, "embedding");
  FOLIO_NEED(out.rows() == ids.numel() && out.cols() == table.cols(), "embedding",
       "out {} must be [num_ids, dim] for ids {} and table {}", desc(out), desc(ids), desc(table));
}

void matmul(const Tensor& w, const Tensor& x, const Tensor& y, const Tensor* bias, DType act) {
  activations(x, act, "matmul");
  FOLIO_NEED(y.dtype == act || y.dtype == DType::F32, "matmul", "y {} must be {} or f32", desc(y), name(act));
  FOLIO_NEED(x.cols() == w.cols(), "matmul", "x {} rows must be as long as w {} rows", desc(x), desc(w));
  FOLIO_NEED(y.rows() == x.rows() && y.cols() == w.rows(), "matmul", "y {} must be [x rows, w rows] for x {} and w {}",
       desc(y), desc(x), desc(w));
  FOLIO_NEED(bias == nullptr || (bias->dtype == DType::F32 && bias->numel() == w.rows()), "matmul",
       "bias {} must be f32 [w rows] for w {}", bias ? desc(*bias) : "", desc(w));
}

void rms_norm(const Tensor& x, const Tensor& w, const Tensor& out, DType act) {
  activations(x, act, "rms_norm");
  activations(out, act, "rms_norm");
  FOLIO_NEED(w.dtype == DType::F32, "rms_norm", "the norm weight {} must be f32", desc(w));
  FOLIO_NEED(w.numel() == x.cols() && out.numel() == x.numel(), "rms_norm", "x {}, w {} and out {} disagree", desc(x),
       desc(w), desc(out));
}

void rope(const Tensor& x, const Tensor& positions, const RopeTable& table, DType act) {
  activations(x, act, "rope");
  FOLIO_NEED(x.ndim == 3, "rope", "x {} must be [tokens, heads, head_dim]", desc(x));
  FOLIO_NEED(positions.dtype == DType::I32 && positions.numel() == x.shape[0], "rope",
       "positions {} must be one i32 per token of x {}", desc(positions), desc(x));
  FOLIO_NEED(table.dim <= x.shape[2] && table.dim % 2 == 0 && table.inv_freq.dtype == DType::F32 &&
           table.inv_freq.numel() == table.dim / 2,
       "rope", "the table (dim {}, inv_freq {}) does not fit x {}", table.dim, desc(table.inv_freq), desc(x));
  FOLIO_NEED(table.temperature_beta == 0.0f || table.temperature_length >= 1.0f, "rope",
       "a query temperature needs a length of at least 1, has {}", table.temperature_length);
}

void scale_logits(const Tensor& logits, float scale, float softcap) {
  FOLIO_NEED(logits.dtype == DType::F32 && logits.ndim == 2, "scale_logits", "logits {} must be f32 [rows, vocab]",
       desc(logits));
  FOLIO_NEED(std::isfinite(scale) && std::isfinite(softcap) && softcap >= 0.0f, "scale_logits",
       "scale {} and soft-cap {} must be finite, the soft-cap not negative", scale, softcap);
}

void same_shape(const Tensor& a, const Tensor& b, DType act, const char* op) {
  activations(a, act, op);
  activations(b, act, op);
  FOLIO_NEED(a.numel() == b.numel(), op, "{} and {} differ in element count", desc(a), desc(b));
}

void paged_kv(const PagedKv& kv, const char* op) {
  FOLIO_NEED(kv.k.codes.ndim == 4 && kv.v.codes.ndim == 4, op,
       "cache pools K {} and V {} must be [blocks, kv_heads, block_size, row]", desc(kv.k.codes), desc(kv.v.codes));
  for (int d = 0; d < 3; ++d)
    FOLIO_NEED(kv.k.codes.shape[d] == kv.v.codes.shape[d], op, "K pool {} and V pool {} disagree in shape",
         desc(kv.k.codes), desc(kv.v.codes));
  FOLIO_NEED(kv.k.codes.shape[2] == kv.block_size, op, "pool rows per block ({}) must equal the block size {}",
       kv.k.codes.shape[2], kv.block_size);
  for (const KvPool* p : {&kv.k, &kv.v}) {
    FOLIO_NEED(p->codes.cols() == (is_scaled(p->type) ? p->row_bytes() : p->dim), op,
         "pool {} of {} rows of {} numbers has rows of the wrong length", desc(p->codes), name(p->type), p->dim);
    FOLIO_NEED(!is_scaled(p->type) || (p->scales.numel() == p->codes.rows() * p->row_scales()), op,
         "a scaled pool {} needs {} scales per row, has {}", desc(p->codes), p->row_scales(), desc(p->scales));
  }
}

void write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const PagedKv& kv, DType act) {
  paged_kv(kv, "write_kv");
  activations(k, act, "write_kv");
  activations(v, act, "write_kv");
  FOLIO_NEED(slot_mapping.dtype == DType::I32 && slot_mapping.numel() == k.shape[0], "write_kv",
       "slot_mapping {} must be one i32 slot per token of k {}", desc(slot_mapping), desc(k));
  FOLIO_NEED(k.numel() == k.shape[0] * kv.num_kv_heads() * kv.head_dim(), "write_kv",
       "k {} must be [tokens, {} kv_heads, {} head_dim]", desc(k), kv.num_kv_heads(), kv.head_dim());
  FOLIO_NEED(v.numel() == v.shape[0] * kv.num_kv_heads() * kv.value_head_dim(), "write_kv",
       "v {} must be [tokens, {} kv_heads, {} value_head_dim]", desc(v), kv.num_kv_heads(), kv.value_head_dim());
}

void attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta, const AttentionParams& params,
               const Tensor& out, DType act) {
  paged_kv(kv, "attention");
  activations(q, act, "attention");
  activations(out, act, "attention");
  FOLIO_NEED(q.ndim == 3 && q.shape[2] == kv.head_dim(), "attention", "q {} must be [tokens, heads, {} head_dim]", desc(q),
       kv.head_dim());
  FOLIO_NEED(q.shape[1] % kv.num_kv_heads() == 0, "attention", "q's {} heads must be a multiple of the {} KV heads",
       q.shape[1], kv.num_kv_heads());
  FOLIO_NEED(out.numel() == q.shape[0] * q.shape[1] * kv.value_head_dim(), "attention",
       "out {} must be [tokens, heads, {} value_head_dim] for q {}", desc(out), kv.value_head_dim(), desc(q));
  FOLIO_NEED(meta.num_tokens == q.shape[0], "attention", "the metadata counts {} tokens, q {} has {}", meta.num_tokens,
       desc(q), q.shape[0]);
  FOLIO_NEED(meta.block_tables.numel() >= meta.num_seqs * meta.max_blocks_per_seq, "attention",
       "block_tables {} are smaller than {} sequences of {} blocks", desc(meta.block_tables), meta.num_seqs,
       meta.max_blocks_per_seq);
  FOLIO_NEED(params.sinks.data == nullptr || (params.sinks.dtype == DType::F32 && params.sinks.numel() == q.shape[1]),
       "attention", "sinks {} must be f32 [heads] for q {}", desc(params.sinks), desc(q));
}

void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  FOLIO_NEED(rows.dtype == DType::I32, "gather_rows", "rows {} must be i32", desc(rows));
  FOLIO_NEED(out.dtype == x.dtype && out.cols() == x.cols() && out.rows() == rows.numel(), "gather_rows",
       "out {} must be [num_rows, cols] of x {} for rows {}", desc(out), desc(x), desc(rows));
}

void moe_route(const Tensor& router_logits, const Tensor& ids, const Tensor& weights, DType act) {
  activations(router_logits, act, "moe_route");
  FOLIO_NEED(router_logits.ndim == 2, "moe_route", "router_logits {} must be [tokens, experts]", desc(router_logits));
  FOLIO_NEED(ids.dtype == DType::I32 && weights.dtype == DType::F32, "moe_route", "ids {} must be i32 and weights {} f32",
       desc(ids), desc(weights));
  FOLIO_NEED(ids.rows() == router_logits.rows() && weights.rows() == ids.rows() && weights.cols() == ids.cols(), "moe_route",
       "ids {} and weights {} must be [tokens, k] for router_logits {}", desc(ids), desc(weights),
       desc(router_logits));
  FOLIO_NEED(ids.cols() >= 1 && ids.cols() <= router_logits.cols(), "moe_route", "k = {} must be between 1 and the {} experts",
       ids.cols(), router_logits.cols());
}

void moe_route_grouped(const Tensor& router_logits, const Tensor* selection_bias, const GroupedRouting& routing,
                       const Tensor& ids, const Tensor& weights, DType act) {
  moe_route(router_logits, ids, weights, act);
  const std::int64_t E = router_logits.cols();
  FOLIO_NEED(routing.num_groups >= 1 && E % routing.num_groups == 0, "moe_route_grouped",
       "{} experts do not split into {} equal groups", E, routing.num_groups);
  FOLIO_NEED(routing.groups_used >= 1 && routing.groups_used <= routing.num_groups, "moe_route_grouped",
       "{} groups used must be between 1 and the {} groups", routing.groups_used, routing.num_groups);
  FOLIO_NEED(ids.cols() <= routing.groups_used * (E / routing.num_groups), "moe_route_grouped",
       "k = {} is more than the {} experts of the {} groups kept", ids.cols(),
       routing.groups_used * (E / routing.num_groups), routing.groups_used);
  FOLIO_NEED(!routing.group_top2 || E / routing.num_groups >= 2, "moe_route_grouped",
       "groups scored by their top two need at least two experts each, not {}", E / routing.num_groups);
  FOLIO_NEED(selection_bias == nullptr || (selection_bias->dtype == DType::F32 && selection_bias->numel() == E),
       "moe_route_grouped", "selection_bias {} must be f32 [{} experts]", desc(*selection_bias), E);
}

void concat_cols(const Tensor& a, const Tensor& b, const Tensor& out, DType act) {
  activations(a, act, "concat_cols");
  activations(b, act, "concat_cols");
  activations(out, act, "concat_cols");
  FOLIO_NEED(a.rows() == out.rows() && b.rows() == out.rows() && a.cols() + b.cols() == out.cols(), "concat_cols",
       "out {} must be [rows, a cols + b cols] for a {} and b {}", desc(out), desc(a), desc(b));
}

void moe_group(const Tensor& ids, const Tensor& offsets, const Tensor& row_tokens, const Tensor& assignment_rows) {
  FOLIO_NEED(ids.dtype == DType::I32 && offsets.dtype == DType::I32 && row_tokens.dtype == DType::I32 &&
           assignment_rows.dtype == DType::I32,
       "moe_group", "ids {}, offsets {}, row_tokens {} and assignment_rows {} must be i32", desc(ids), desc(offsets),
       desc(row_tokens), desc(assignment_rows));
  FOLIO_NEED(offsets.numel() >= 2, "moe_group", "offsets {} must be [experts + 1]", desc(offsets));
  FOLIO_NEED(row_tokens.numel() == ids.numel() && assignment_rows.numel() == ids.numel(), "moe_group",
       "row_tokens {} and assignment_rows {} must hold one entry per assignment of ids {}", desc(row_tokens),
       desc(assignment_rows), desc(ids));
}

void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, const Tensor& y, const Tensor* bias,
                   DType act) {
  FOLIO_NEED(w.ndim == 3, "expert_matmul", "w {} must be [experts, out, in]", desc(w));
  FOLIO_NEED(offsets.dtype == DType::I32 && offsets.numel() == w.shape[0] + 1, "expert_matmul",
       "offsets {} must be i32 [experts + 1] for w {}", desc(offsets), desc(w));
  activations(x, act, "expert_matmul");
  activations(y, act, "expert_matmul");
  FOLIO_NEED(x.cols() == w.cols(), "expert_matmul", "x {} rows must be as long as w {} rows", desc(x), desc(w));
  FOLIO_NEED(y.rows() == x.rows() && y.cols() == w.shape[1], "expert_matmul", "y {} must be [x rows, w's out] for x {}, w {}",
       desc(y), desc(x), desc(w));
  FOLIO_NEED(bias == nullptr || (bias->dtype == DType::F32 && bias->numel() == w.shape[0] * w.shape[1]), "expert_matmul",
       "bias {} must be f32 [experts, out] for w {}", bias ? desc(*bias) : "", desc(w));
}

void moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, const Tensor& out, DType act) {
  activations(y, act, "moe_combine");
  activations(out, act, "moe_combine");
  FOLIO_NEED(weights.dtype == DType::F32, "moe_combine", "weights {} must be f32", desc(weights));
  FOLIO_NEED(assignment_rows.dtype == DType::I32 && assignment_rows.numel() == weights.numel(), "moe_combine",
       "assignment_rows {} must be i32 [tokens, k] like weights {}", desc(assignment_rows), desc(weights));
  FOLIO_NEED(out.rows() == weights.rows() && out.cols() == y.cols(), "moe_combine",
       "out {} must be [tokens, y cols] for y {} and weights {}", desc(out), desc(y), desc(weights));
  FOLIO_NEED(y.rows() == weights.numel(), "moe_combine", "y {} must hold one row per assignment of weights {}", desc(y),
       desc(weights));
}

void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate, DType act) {
  same_shape(x, y, act, "add_sigmoid_gated");
  activations(gate, act, "add_sigmoid_gated");
  FOLIO_NEED(gate.numel() == x.rows(), "add_sigmoid_gated", "gate {} must be [rows, 1] for x {}", desc(gate), desc(x));
}

namespace {

void state_slots(const Tensor& slots, const AttentionMetadata& meta, const char* op) {
  FOLIO_NEED(slots.dtype == DType::I32 && slots.numel() >= meta.num_seqs, op,
             "state_slots {} must be i32 [num_seqs] for {} sequences", desc(slots), meta.num_seqs);
}

}  // namespace

void causal_conv1d(const Tensor& x, const Tensor& w, const AttentionMetadata& meta, const Tensor& slots,
                   const RecurrentState& state, const Tensor& out, DType act) {
  const char* op = "causal_conv1d";
  activations(x, act, op);
  same_shape(x, out, act, op);
  FOLIO_NEED(x.data != out.data, op, "out must not alias x");
  FOLIO_NEED(x.ndim == 2 && x.rows() == meta.num_tokens, op, "x {} must be [num_tokens {}, channels]", desc(x),
             meta.num_tokens);
  FOLIO_NEED(w.dtype == DType::F32 && w.ndim == 2 && w.rows() == x.cols() && w.cols() >= 1, op,
             "w {} must be f32 [channels, kernel] for x {}", desc(w), desc(x));
  FOLIO_NEED(state.conv.dtype == DType::F32 && state.conv.ndim == 3 && state.conv.shape[1] == w.cols() - 1 &&
                 state.conv.shape[2] == x.cols(),
             op, "state window {} must be f32 [slots, kernel - 1, channels] for w {}", desc(state.conv), desc(w));
  state_slots(slots, meta, op);
}

void gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const DeltaRuleParams& p,
                      const AttentionMetadata& meta, const Tensor& slots, const RecurrentState& state,
                      const Tensor& out, DType act) {
  const char* op = "gated_delta_rule";
  activations(qkv, act, op);
  activations(a, act, op);
  same_shape(a, b, act, op);
  activations(out, act, op);
  FOLIO_NEED(state.state.dtype == DType::F32 && state.state.ndim == 4, op,
             "state {} must be f32 [slots, value_heads, key_dim, value_dim]", desc(state.state));
  const std::int64_t nv = state.num_value_heads(), dk = state.key_dim(), dv = state.value_dim();
  const std::int64_t nk = p.num_key_heads;
  FOLIO_NEED(nk > 0 && nv % nk == 0, op, "{} value heads must be a multiple of the {} key heads", nv, nk);
  FOLIO_NEED(qkv.ndim == 2 && qkv.rows() == meta.num_tokens && qkv.cols() == 2 * nk * dk + nv * dv, op,
             "qkv {} must be [num_tokens {}, {}] for {} key heads of {} and {} value heads of {}", desc(qkv),
             meta.num_tokens, 2 * nk * dk + nv * dv, nk, dk, nv, dv);
  FOLIO_NEED(a.numel() == meta.num_tokens * nv, op, "a {} must be [num_tokens, {}]", desc(a), nv);
  FOLIO_NEED(out.numel() == meta.num_tokens * nv * dv, op, "out {} must be [num_tokens, {}, {}]", desc(out), nv, dv);
  FOLIO_NEED(p.decay.dtype == DType::F32 && p.decay.numel() == nv && p.dt_bias.dtype == DType::F32 &&
                 p.dt_bias.numel() == nv,
             op, "decay {} and dt_bias {} must be f32 [{}]", desc(p.decay), desc(p.dt_bias), nv);
  state_slots(slots, meta, op);
}

void sample(const Tensor& logits, const SamplingBatch& b) {
  FOLIO_NEED(logits.dtype == DType::F32 && logits.ndim == 2, "sample", "logits {} must be f32 [rows, vocab]", desc(logits));
  FOLIO_NEED(b.rows.bytes() == static_cast<std::size_t>(b.num_rows) * sizeof(SamplingRowParams), "sample",
       "rows {} must hold {} records of {} bytes", desc(b.rows), b.num_rows, sizeof(SamplingRowParams));
  FOLIO_NEED(b.results.bytes() >= static_cast<std::size_t>(b.num_rows) * sizeof(SampleResult), "sample",
       "results {} must hold {} records of {} bytes", desc(b.results), b.num_rows, sizeof(SampleResult));
  FOLIO_NEED(b.logprobs.bytes() >= static_cast<std::size_t>(b.num_logprob_rows) * sizeof(LogprobResult), "sample",
       "logprobs {} must hold {} records of {} bytes", desc(b.logprobs), b.num_logprob_rows, sizeof(LogprobResult));
  FOLIO_NEED(b.adjustments.bytes() % sizeof(LogitAdjustment) == 0, "sample", "adjustments {} are not whole records of {} bytes",
       desc(b.adjustments), sizeof(LogitAdjustment));
  FOLIO_NEED(b.masks.bytes() == static_cast<std::size_t>(b.num_masks * b.mask_words) * sizeof(std::uint32_t), "sample",
       "masks {} must hold {} rows of {} words", desc(b.masks), b.num_masks, b.mask_words);
  FOLIO_NEED(b.num_masks == 0 || b.mask_words * 32 >= logits.cols(), "sample",
       "token masks of {} words cannot cover {} tokens", b.mask_words, logits.cols());
}

}  // namespace folio::op_checks
#undef FOLIO_NEED
