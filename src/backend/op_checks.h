// Shape and type checks shared by every backend's ops, so that a wrong call
// fails the same clear way whichever backend runs it; each message names the
// shapes and types it compared. `act` is the backend's activation type.
#pragma once

#include "backend/backend.h"

namespace folio::op_checks {

void embedding(const Tensor& table, const Tensor& ids, const Tensor& out, DType act);
void matmul(const Tensor& w, const Tensor& x, const Tensor& y, const Tensor* bias, DType act);
void rms_norm(const Tensor& x, const Tensor& w, const Tensor& out, DType act);
void rope(const Tensor& x, const Tensor& positions, const RopeTable& table, DType act);
void scale_logits(const Tensor& logits, float scale, float softcap);
// a and b are activations with the same number of elements.
void same_shape(const Tensor& a, const Tensor& b, DType act, const char* op);
void activations(const Tensor& x, DType act, const char* op);
// The two pools of a layer agree in blocks, heads and block size, and their
// rows and scales have the lengths their types need.
void paged_kv(const PagedKv& kv, const char* op);
void write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, const PagedKv& kv, DType act);
void attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta, const AttentionParams& params,
               const Tensor& out, DType act);
void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out);
void moe_route(const Tensor& router_logits, const Tensor& ids, const Tensor& weights, DType act);
void moe_route_grouped(const Tensor& router_logits, const Tensor* selection_bias, const GroupedRouting& routing,
                       const Tensor& ids, const Tensor& weights, DType act);
void concat_cols(const Tensor& a, const Tensor& b, const Tensor& out, DType act);
void moe_group(const Tensor& ids, const Tensor& offsets, const Tensor& row_tokens, const Tensor& assignment_rows);
void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, const Tensor& y, const Tensor* bias,
                   DType act);
void moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, const Tensor& out, DType act);
void add_sigmoid_gated(const Tensor& x, const Tensor& y, const Tensor& gate, DType act);
void sample(const Tensor& logits, const SamplingBatch& batch);
void causal_conv1d(const Tensor& x, const Tensor& w, const AttentionMetadata& meta, const Tensor& state_slots,
                   const RecurrentState& state, const Tensor& out, DType act);
void gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const DeltaRuleParams& params,
                      const AttentionMetadata& meta, const Tensor& state_slots, const RecurrentState& state,
                      const Tensor& out, DType act);

}  // namespace folio::op_checks
