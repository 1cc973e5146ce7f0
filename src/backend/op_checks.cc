#include "backend/op_checks.h"

#include "core/error.h"

namespace folio::op_checks {
namespace {

void need(bool ok, const char* op, const char* what) {
  if (!ok) fail("backend op {}: {}", op, what);
}

}  // namespace

void embedding(const Tensor& table, const Tensor& ids, const Tensor& out) {
  need(ids.dtype == DType::I32, "embedding", "ids must be i32");
  need(out.dtype == DType::F32, "embedding", "out must be f32");
  need(out.rows() == ids.numel() && out.cols() == table.cols(), "embedding", "out must be [num_ids, dim]");
}

void matmul(const Tensor& w, const Tensor& x, const Tensor& y, const Tensor* bias) {
  need(x.dtype == DType::F32 && y.dtype == DType::F32, "matmul", "x and y must be f32");
  need(x.cols() == w.cols(), "matmul", "x's rows must be as long as w's");
  need(y.rows() == x.rows() && y.cols() == w.rows(), "matmul", "y must be [x rows, w rows]");
  need(bias == nullptr || (bias->dtype == DType::F32 && bias->numel() == w.rows()), "matmul",
       "bias must be f32 [w rows]");
}

void rms_norm(const Tensor& x, const Tensor& w, const Tensor& out) {
  need(x.dtype == DType::F32 && out.dtype == DType::F32 && w.dtype == DType::F32, "rms_norm", "f32 only");
  need(w.numel() == x.cols() && out.numel() == x.numel(), "rms_norm", "shapes disagree");
}

void rope(const Tensor& x, const Tensor& positions, const RopeTable& table) {
  need(x.dtype == DType::F32 && x.ndim == 3, "rope", "x must be f32 [tokens, heads, head_dim]");
  need(positions.dtype == DType::I32 && positions.numel() == x.shape[0], "rope", "one i32 position per token");
  need(table.dim <= x.shape[2] && table.dim % 2 == 0 &&
           static_cast<std::int64_t>(table.inv_freq.size()) == table.dim / 2,
       "rope", "table does not fit the head size");
}

void same_f32_shape(const Tensor& a, const Tensor& b, const char* op) {
  need(a.dtype == DType::F32 && b.dtype == DType::F32, op, "f32 only");
  need(a.numel() == b.numel(), op, "element counts differ");
}

void paged_kv(const PagedKv& kv, const char* op) {
  need(kv.k.codes.ndim == 4 && kv.v.codes.ndim == 4, op, "cache pools must be [blocks, kv_heads, block_size, row]");
  for (int d = 0; d < 3; ++d) need(kv.k.codes.shape[d] == kv.v.codes.shape[d], op, "K and V pools disagree in shape");
  need(kv.k.codes.shape[2] == kv.block_size, op, "pool rows per block must equal the block size");
  for (const KvPool* p : {&kv.k, &kv.v}) {
    need(p->codes.cols() == (is_scaled(p->type) ? p->row_bytes() : p->dim), op, "pool rows have the wrong length");
    need(!is_scaled(p->type) || (p->scales.numel() == p->codes.rows() * p->row_scales()), op,
         "a scaled pool needs one set of scales per row");
  }
}

void write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const PagedKv& kv) {
  paged_kv(kv, "write_kv");
  need(k.dtype == DType::F32 && v.dtype == DType::F32, "write_kv", "k and v must be f32");
  need(slot_mapping.dtype == DType::I32 && slot_mapping.numel() == k.shape[0], "write_kv", "one slot per token");
  need(k.numel() == k.shape[0] * kv.num_kv_heads() * kv.head_dim(), "write_kv", "k must be [tokens, kv_heads, head_dim]");
  need(v.numel() == v.shape[0] * kv.num_kv_heads() * kv.value_head_dim(), "write_kv",
       "v must be [tokens, kv_heads, value_head_dim]");
}

void attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta, const Tensor& out) {
  paged_kv(kv, "attention");
  need(q.dtype == DType::F32 && q.ndim == 3 && q.shape[2] == kv.head_dim(), "attention",
       "q must be f32 [tokens, heads, head_dim]");
  need(q.shape[1] % kv.num_kv_heads() == 0, "attention", "heads must be a multiple of KV heads");
  need(out.dtype == DType::F32 && out.numel() == q.shape[0] * q.shape[1] * kv.value_head_dim(), "attention",
       "out must be f32 [tokens, heads, value_head_dim]");
  need(meta.num_tokens == q.shape[0], "attention", "metadata counts another number of tokens");
}

void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) {
  need(rows.dtype == DType::I32, "gather_rows", "rows must be i32");
  need(out.dtype == x.dtype && out.cols() == x.cols() && out.rows() == rows.numel(), "gather_rows",
       "out must be [num_rows, cols] of x's type");
}

void moe_route(const Tensor& router_logits, const Tensor& ids, const Tensor& weights) {
  need(router_logits.dtype == DType::F32 && router_logits.ndim == 2, "moe_route",
       "router_logits must be f32 [tokens, experts]");
  need(ids.dtype == DType::I32 && weights.dtype == DType::F32, "moe_route", "ids must be i32 and weights f32");
  need(ids.rows() == router_logits.rows() && weights.rows() == ids.rows() && weights.cols() == ids.cols(), "moe_route",
       "ids and weights must be [tokens, k]");
  need(ids.cols() >= 1 && ids.cols() <= router_logits.cols(), "moe_route", "k must be between 1 and the experts");
}

void moe_group(const Tensor& ids, const Tensor& offsets, const Tensor& row_tokens, const Tensor& assignment_rows) {
  need(ids.dtype == DType::I32 && offsets.dtype == DType::I32 && row_tokens.dtype == DType::I32 &&
           assignment_rows.dtype == DType::I32,
       "moe_group", "i32 only");
  need(offsets.numel() >= 2, "moe_group", "offsets must be [experts + 1]");
  need(row_tokens.numel() == ids.numel() && assignment_rows.numel() == ids.numel(), "moe_group",
       "row_tokens and assignment_rows must hold one entry per assignment");
}

void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, const Tensor& y) {
  need(w.ndim == 3, "expert_matmul", "w must be [experts, out, in]");
  need(offsets.dtype == DType::I32 && offsets.numel() == w.shape[0] + 1, "expert_matmul",
       "offsets must be i32 [experts + 1]");
  need(x.dtype == DType::F32 && y.dtype == DType::F32, "expert_matmul", "x and y must be f32");
  need(x.cols() == w.cols(), "expert_matmul", "x's rows must be as long as w's");
  need(y.rows() == x.rows() && y.cols() == w.shape[1], "expert_matmul", "y must be [x rows, w's out]");
}

void moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, const Tensor& out) {
  need(y.dtype == DType::F32 && out.dtype == DType::F32 && weights.dtype == DType::F32, "moe_combine",
       "y, weights and out must be f32");
  need(assignment_rows.dtype == DType::I32 && assignment_rows.numel() == weights.numel(), "moe_combine",
       "assignment_rows must be i32 [tokens, k] like weights");
  need(out.rows() == weights.rows() && out.cols() == y.cols(), "moe_combine", "out must be [tokens, y cols]");
  need(y.rows() == weights.numel(), "moe_combine", "y must hold one row per assignment");
}

void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate) {
  same_f32_shape(x, y, "add_sigmoid_gated");
  need(gate.dtype == DType::F32 && gate.numel() == x.rows(), "add_sigmoid_gated", "gate must be f32 [rows, 1]");
}

}  // namespace folio::op_checks
