#include "backend/reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/op_checks.h"
#include "core/error.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

// Row (slot, kv_head) of a pool decoded to floats.
void load_row(const PagedKv& kv, const KvPool& pool, std::int64_t slot, std::int64_t kv_head, float* out) {
  const std::int64_t r = kv.row_of(slot, kv_head);
  decode_kv_row(pool.type, pool.row(r), pool.row_scale(r), pool.dim, out);
}

}  // namespace

namespace reference {

void matmul_rows(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias, std::int64_t row_begin,
                 std::int64_t row_end, std::vector<float>& scratch) {
  const std::int64_t n = x.rows(), k = x.cols(), m = w.rows();
  FOLIO_CHECK(w.layout == Layout::kGguf);  // packed weights are the CPU backend's own
  scratch.resize(static_cast<std::size_t>(k));
  for (std::int64_t o = row_begin; o < row_end; ++o) {
    dequantize_row(w.dtype, w.row(o), scratch.data(), k);
    for (std::int64_t t = 0; t < n; ++t) {
      const float* xr = x.as<const float>() + t * k;
      float acc = 0.0f;
      for (std::int64_t i = 0; i < k; ++i) acc += scratch[i] * xr[i];
      if (bias) acc += bias->as<const float>()[o];
      y.as<float>()[t * m + o] = acc;
    }
  }
}

void attention_items(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                     const AttentionParams& params, Tensor& out, std::int64_t item_begin, std::int64_t item_end,
                     std::vector<float>& scores) {
  std::vector<float> row;
  const std::int64_t heads = q.shape[1], hd = q.shape[2], vd = kv.value_head_dim();
  const std::int64_t group = heads / kv.num_kv_heads();
  const auto* query_start = meta.query_start.as<const std::int32_t>();
  const auto* seq_lens = meta.seq_lens.as<const std::int32_t>();
  const auto* positions = meta.positions.as<const std::int32_t>();
  std::int64_t s = 0;
  for (std::int64_t item = item_begin; item < item_end; ++item) {
    const std::int64_t t = item / heads, h = item % heads;
    while (query_start[s + 1] <= t) ++s;
    const auto* table = meta.block_tables.as<const std::int32_t>() + s * meta.max_blocks_per_seq;
    const std::int64_t pos = positions[t];
    FOLIO_CHECK(pos < seq_lens[s]);
    std::int64_t first = 0;
    if (params.sliding_window > 0) first = std::max<std::int64_t>(0, pos - params.sliding_window + 1);
    const std::int64_t kvh = h / group;
    const float* qv = q.as<const float>() + (t * heads + h) * hd;
    scores.assign(static_cast<std::size_t>(pos + 1 - first), 0.0f);
    row.resize(static_cast<std::size_t>(std::max(hd, vd)));
    float max_score = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = first; j <= pos; ++j) {
      std::int64_t slot = table[j / kv.block_size] * kv.block_size + j % kv.block_size;
      load_row(kv, kv.k, slot, kvh, row.data());
      float dot = 0.0f;
      for (std::int64_t d = 0; d < hd; ++d) dot += qv[d] * row[d];
      dot *= params.scale;
      if (params.softcap > 0) dot = params.softcap * std::tanh(dot / params.softcap);
      scores[j - first] = dot;
      max_score = std::max(max_score, dot);
    }
    float sum = 0.0f;
    for (auto& sc : scores) {
      sc = std::exp(sc - max_score);
      sum += sc;
    }
    float* o = out.as<float>() + (t * heads + h) * vd;
    for (std::int64_t d = 0; d < vd; ++d) o[d] = 0.0f;
    for (std::int64_t j = first; j <= pos; ++j) {
      std::int64_t slot = table[j / kv.block_size] * kv.block_size + j % kv.block_size;
      float p = scores[j - first] / sum;
      load_row(kv, kv.v, slot, kvh, row.data());
      for (std::int64_t d = 0; d < vd; ++d) o[d] += p * row[d];
    }
  }
}

void moe_combine_tokens(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out,
                        std::int64_t token_begin, std::int64_t token_end) {
  const std::int64_t k = weights.cols(), d = out.cols();
  for (std::int64_t t = token_begin; t < token_end; ++t) {
    float* o = out.as<float>() + t * d;
    for (std::int64_t c = 0; c < d; ++c) o[c] = 0.0f;
    for (std::int64_t r = 0; r < k; ++r) {
      const std::int64_t row = assignment_rows.as<const std::int32_t>()[t * k + r];
      FOLIO_CHECK(row >= 0 && row < y.rows());
      const float w = weights.as<const float>()[t * k + r];
      const float* yr = y.as<const float>() + row * d;
      for (std::int64_t c = 0; c < d; ++c) o[c] += w * yr[c];
    }
  }
}

std::pair<std::int64_t, std::int64_t> expert_rows(const Tensor& offsets, std::int64_t e, std::int64_t num_rows) {
  const auto* o = offsets.as<const std::int32_t>();
  const std::int64_t begin = o[e], end = o[e + 1];
  if (begin < 0 || begin > end || end > num_rows)
    fail("expert_matmul: expert {} has rows [{}, {}), outside the {} rows given", e, begin, end, num_rows);
  return {begin, end};
}

}  // namespace reference

// An empty copy may come with null pointers (an empty vector's data()),
// which memcpy must not be given.
void ReferenceBackend::copy_to_device(Tensor& dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst.data, src, bytes);
}

void ReferenceBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src.data, bytes);
}

void ReferenceBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  op_checks::embedding(table, ids, out);
  FOLIO_CHECK(table.layout == Layout::kGguf);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    std::int32_t id = ids.as<const std::int32_t>()[i];
    if (id < 0 || id >= table.rows()) fail("token id {} is outside the vocabulary of {}", id, table.rows());
    dequantize_row(table.dtype, table.row(id), out.as<float>() + i * out.cols(), table.cols());
  }
}

void ReferenceBackend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  op_checks::matmul(w, x, y, bias);
  std::vector<float> scratch;
  reference::matmul_rows(w, x, y, bias, 0, w.rows(), scratch);
}

void ReferenceBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  op_checks::rms_norm(x, w, out);
  const std::int64_t d = x.cols();
  for (std::int64_t r = 0; r < x.rows(); ++r) {
    const float* xr = x.as<const float>() + r * d;
    float* o = out.as<float>() + r * d;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < d; ++i) sum += xr[i] * xr[i];
    float inv = 1.0f / std::sqrt(sum / static_cast<float>(d) + eps);
    for (std::int64_t i = 0; i < d; ++i) o[i] = xr[i] * inv * w.as<const float>()[i];
  }
}

void ReferenceBackend::rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  op_checks::rope(x, positions, table);
  const std::int64_t heads = x.shape[1], hd = x.shape[2], half = table.dim / 2;
  for (std::int64_t t = 0; t < x.shape[0]; ++t) {
    float pos = static_cast<float>(positions.as<const std::int32_t>()[t]);
    for (std::int64_t h = 0; h < heads; ++h) {
      float* v = x.as<float>() + (t * heads + h) * hd;
      for (std::int64_t i = 0; i < half; ++i) {
        float theta = pos * table.inv_freq[i];
        float c = std::cos(theta) * table.attention_factor;
        float s = std::sin(theta) * table.attention_factor;
        std::int64_t a = table.neox ? i : 2 * i;
        std::int64_t b = table.neox ? i + half : 2 * i + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

void ReferenceBackend::glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  op_checks::same_f32_shape(gate, up, "glu");
  op_checks::same_f32_shape(gate, out, "glu");
  for (std::int64_t i = 0; i < gate.numel(); ++i) {
    float g = gate.as<const float>()[i];
    float a;
    if (act == GluActivation::kSilu) {
      a = g / (1.0f + std::exp(-g));
    } else {
      // GELU, tanh approximation.
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      a = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
    }
    out.as<float>()[i] = a * up.as<const float>()[i];
  }
}

void ReferenceBackend::add(Tensor& x, const Tensor& y) {
  op_checks::same_f32_shape(x, y, "add");
  for (std::int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] += y.as<const float>()[i];
}

void ReferenceBackend::scale(Tensor& x, float s) {
  for (std::int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] *= s;
}

void ReferenceBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) {
  op_checks::write_kv(k, v, slot_mapping, kv);
  const std::int64_t heads = kv.num_kv_heads(), hd = kv.head_dim(), vd = kv.value_head_dim();
  for (std::int64_t t = 0; t < k.shape[0]; ++t) {
    std::int64_t slot = slot_mapping.as<const std::int32_t>()[t];
    if (slot < 0) continue;
    FOLIO_CHECK(slot < kv.num_blocks() * kv.block_size);
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t r = kv.row_of(slot, h);
      encode_kv_row(kv.k.type, k.as<const float>() + (t * heads + h) * hd, hd, kv.k.row(r), kv.k.row_scale(r));
      encode_kv_row(kv.v.type, v.as<const float>() + (t * heads + h) * vd, vd, kv.v.row(r), kv.v.row_scale(r));
    }
  }
}

void ReferenceBackend::attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                                 const AttentionParams& params, Tensor& out) {
  op_checks::attention(q, kv, meta, out);
  std::vector<float> scratch;
  reference::attention_items(q, kv, meta, params, out, 0, q.shape[0] * q.shape[1], scratch);
}

void ReferenceBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  op_checks::gather_rows(x, rows, out);
  for (std::int64_t i = 0; i < rows.numel(); ++i) {
    std::int32_t r = rows.as<const std::int32_t>()[i];
    FOLIO_CHECK(r >= 0 && r < x.rows());
    std::memcpy(out.row(i), x.row(r), x.row_bytes());
  }
}

void ReferenceBackend::copy_blocks(PagedKv& kv, const std::vector<std::pair<std::int32_t, std::int32_t>>& pairs) {
  for (auto [src, dst] : pairs) {
    FOLIO_CHECK(src >= 0 && src < kv.num_blocks() && dst >= 0 && dst < kv.num_blocks());
    kv.k.copy_block(src, dst);
    kv.v.copy_block(src, dst);
  }
}

void ReferenceBackend::moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) {
  op_checks::moe_route(router_logits, ids, weights);
  const std::int64_t E = router_logits.cols(), k = ids.cols();
  std::vector<float> probs(static_cast<std::size_t>(E));
  std::vector<bool> taken(static_cast<std::size_t>(E));
  for (std::int64_t t = 0; t < router_logits.rows(); ++t) {
    const float* logits = router_logits.as<const float>() + t * E;
    float max_logit = -std::numeric_limits<float>::infinity();
    for (std::int64_t e = 0; e < E; ++e) max_logit = std::max(max_logit, logits[e]);
    float sum = 0.0f;
    for (std::int64_t e = 0; e < E; ++e) {
      probs[e] = std::exp(logits[e] - max_logit);
      sum += probs[e];
    }
    for (std::int64_t e = 0; e < E; ++e) probs[e] /= sum;
    std::fill(taken.begin(), taken.end(), false);
    std::int32_t* id = ids.as<std::int32_t>() + t * k;
    float* w = weights.as<float>() + t * k;
    float chosen = 0.0f;
    for (std::int64_t r = 0; r < k; ++r) {
      std::int64_t best = -1;
      for (std::int64_t e = 0; e < E; ++e)
        if (!taken[e] && (best < 0 || probs[e] > probs[best])) best = e;
      taken[best] = true;
      id[r] = static_cast<std::int32_t>(best);
      w[r] = probs[best];
      chosen += probs[best];
    }
    if (normalize)
      for (std::int64_t r = 0; r < k; ++r) w[r] /= chosen;
  }
}

void ReferenceBackend::moe_group(const Tensor& ids, Tensor& offsets, Tensor& row_tokens, Tensor& assignment_rows) {
  op_checks::moe_group(ids, offsets, row_tokens, assignment_rows);
  const std::int64_t E = offsets.numel() - 1, k = ids.cols(), n = ids.numel();
  const auto* id = ids.as<const std::int32_t>();
  auto* o = offsets.as<std::int32_t>();
  std::fill(o, o + E + 1, 0);
  for (std::int64_t a = 0; a < n; ++a) {
    if (id[a] < 0 || id[a] >= E) fail("moe_group: expert id {} is outside the {} experts", id[a], E);
    ++o[id[a] + 1];
  }
  for (std::int64_t e = 0; e < E; ++e) o[e + 1] += o[e];
  std::vector<std::int32_t> next(o, o + E);
  for (std::int64_t a = 0; a < n; ++a) {
    const std::int32_t row = next[id[a]]++;
    row_tokens.as<std::int32_t>()[row] = static_cast<std::int32_t>(a / k);
    assignment_rows.as<std::int32_t>()[a] = row;
  }
}

void ReferenceBackend::expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y) {
  op_checks::expert_matmul(w, x, offsets, y);
  std::vector<float> scratch;
  for (std::int64_t e = 0; e < w.shape[0]; ++e) {
    const auto [begin, end] = reference::expert_rows(offsets, e, x.rows());
    if (begin == end) continue;
    Tensor xe = x.rows_view(begin, end - begin), ye = y.rows_view(begin, end - begin);
    const Tensor we = expert_weight(w, e);
    reference::matmul_rows(we, xe, ye, nullptr, 0, we.rows(), scratch);
  }
}

void ReferenceBackend::moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) {
  op_checks::moe_combine(y, assignment_rows, weights, out);
  reference::moe_combine_tokens(y, assignment_rows, weights, out, 0, out.rows());
}

void ReferenceBackend::add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) {
  op_checks::add_sigmoid_gated(x, y, gate);
  const std::int64_t d = x.cols();
  for (std::int64_t t = 0; t < x.rows(); ++t) {
    const float g = 1.0f / (1.0f + std::exp(-gate.as<const float>()[t]));
    for (std::int64_t c = 0; c < d; ++c) x.as<float>()[t * d + c] += g * y.as<const float>()[t * d + c];
  }
}

}  // namespace folio
