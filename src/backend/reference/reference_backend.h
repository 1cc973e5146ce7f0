// ReferenceBackend: every op as plain, single-threaded loops in fp32, written
// to be obviously right. The other backends are tested against it.
#pragma once

#include <utility>
#include <vector>

#include "backend/backend.h"

namespace folio {

// The reference kernels over a range of their work, so that a threaded
// backend can split the same arithmetic over threads and stay bit-identical.
namespace reference {

// Output rows [row_begin, row_end) of matmul.
void matmul_rows(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias, std::int64_t row_begin,
                 std::int64_t row_end, std::vector<float>& scratch);

// Items [item_begin, item_end) of attention, item = token * num_heads + head.
void attention_items(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                     const AttentionParams& params, Tensor& out, std::int64_t item_begin, std::int64_t item_end,
                     std::vector<float>& scores);

// Tokens [token_begin, token_end) of moe_combine.
void moe_combine_tokens(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out,
                        std::int64_t token_begin, std::int64_t token_end);

// Expert e's row range [begin, end) of expert_matmul's offsets, checked.
std::pair<std::int64_t, std::int64_t> expert_rows(const Tensor& offsets, std::int64_t e, std::int64_t num_rows);

}  // namespace reference

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  Device device() const override { return Device::kCpu; }
  Buffer allocate(std::size_t bytes) override { return Buffer(bytes); }
  void copy_to_device(Tensor& dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) override;

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override;
  void matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void rope(Tensor& x, const Tensor& positions, const RopeTable& table) override;
  void glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) override;
  void add(Tensor& x, const Tensor& y) override;
  void scale(Tensor& x, float s) override;
  void write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) override;
  void attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta, const AttentionParams& params,
                 Tensor& out) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override;
  void copy_blocks(PagedKv& kv, const std::vector<std::pair<std::int32_t, std::int32_t>>& pairs) override;
  void moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) override;
  void moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) override;
  void expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y) override;
  void moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) override;
  void add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) override;
};

}  // namespace folio
