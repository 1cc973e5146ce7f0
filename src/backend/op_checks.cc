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

}  // namespace folio::op_checks
