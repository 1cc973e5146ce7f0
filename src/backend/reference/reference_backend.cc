#include "backend/reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/op_checks.h"
#include "backend/reference/kv_rows.h"
#include "core/error.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

// Row (slot, kv_head) of a pool decoded to floats.
void load_row(const PagedKv& kv, const KvPool& pool, std::int64_t slot, std::int64_t kv_head, float* out) {
  const std::int64_t r = kv.row_of(slot, kv_head);
  decode_kv_row(pool.type, kv_rows::codes(pool, r), kv_rows::scales(pool, r), pool.dim, out);
}

// An activation tensor as f32: an F32 tensor itself; an F16 or BF16 one as a
// converted copy, which store() rounds back into the tensor.
class AsF32 {
 public:
  explicit AsF32(const Tensor& t) : source_(t), view_(t) {
    if (t.dtype == DType::F32 || t.numel() == 0) return;
    FOLIO_CHECK(t.dtype == DType::F16 || t.dtype == DType::BF16);
    copy_.resize(static_cast<std::size_t>(t.numel()));
    dequantize_row(t.dtype, t.data, copy_.data(), t.numel());
    view_.data = copy_.data();
    view_.dtype = DType::F32;
  }
  Tensor& operator*() { return view_; }
  Tensor* operator->() { return &view_; }
  void store() {
    if (!copy_.empty()) quantize_row(source_.dtype, copy_.data(), source_.data, source_.numel());
  }

 private:
  Tensor source_;
  Tensor view_;
  std::vector<float> copy_;
};

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
    // A sink joins the maximum and, after the scores, the denominator.
    const float sink = params.sinks.data != nullptr ? params.sinks.as<const float>()[h] : 0.0f;
    if (params.sinks.data != nullptr) max_score = std::max(max_score, sink);
    float sum = 0.0f;
    for (auto& sc : scores) {
      sc = std::exp(sc - max_score);
      sum += sc;
    }
    if (params.sinks.data != nullptr) sum += std::exp(sink - max_score);
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

void sample_rows(const Tensor& logits, const SamplingBatch& batch, std::int64_t row_begin, std::int64_t row_end,
                 RowSampler& sampler) {
  const auto* rows = static_cast<const SamplingRowParams*>(batch.rows.data);
  const auto* adjustments = static_cast<const LogitAdjustment*>(batch.adjustments.data);
  const auto num_adjustments = static_cast<std::int64_t>(batch.adjustments.bytes() / sizeof(LogitAdjustment));
  auto* results = static_cast<SampleResult*>(batch.results.data);
  auto* logprobs = static_cast<LogprobResult*>(batch.logprobs.data);
  const auto* masks = static_cast<const std::uint32_t*>(batch.masks.data);
  const std::int64_t V = logits.cols();
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    const SamplingRowParams& p = rows[r];
    if (p.logits_row < 0 || p.logits_row >= logits.rows())
      fail("sample: row {} reads logits row {} of {}", r, p.logits_row, logits.rows());
    if (p.adjust_begin < 0 || p.adjust_begin > p.adjust_end || p.adjust_end > num_adjustments)
      fail("sample: row {} has adjustments [{}, {}) of {}", r, p.adjust_begin, p.adjust_end, num_adjustments);
    const bool wants_logprobs = p.num_logprobs >= 0;
    if (wants_logprobs && (p.logprob_slot < 0 || p.logprob_slot >= batch.num_logprob_rows))
      fail("sample: row {} puts its logprobs in slot {} of {}", r, p.logprob_slot, batch.num_logprob_rows);
    const std::span<const float> row(logits.as<const float>() + p.logits_row * V, static_cast<std::size_t>(V));
    const std::span<const LogitAdjustment> adjust(adjustments + p.adjust_begin,
                                                  static_cast<std::size_t>(p.adjust_end - p.adjust_begin));
    if (p.mask_row < -1 || p.mask_row >= batch.num_masks)
      fail("sample: row {} reads token mask {} of {}", r, p.mask_row, batch.num_masks);
    const std::span<const std::uint32_t> mask =
        p.mask_row < 0 ? std::span<const std::uint32_t>()
                       : std::span<const std::uint32_t>(masks + p.mask_row * batch.mask_words,
                                                        static_cast<std::size_t>(batch.mask_words));
    sampler.run(row, p, adjust, mask, results[r], wants_logprobs ? &logprobs[p.logprob_slot] : nullptr);
  }
}

}  // namespace reference

ReferenceBackend::ReferenceBackend(DType activations) : act_(activations) {
  if (act_ != DType::F32 && act_ != DType::F16 && act_ != DType::BF16)
    fail("the reference backend's activations are f32, f16 or bf16, not {}", folio::name(act_));
}

// An empty copy may come with null pointers (an empty vector's data()),
// which memcpy must not be given.
void ReferenceBackend::copy_to_device(const Tensor& dst, const void* src, std::size_t bytes) {
  FOLIO_CHECK(bytes <= dst.bytes());
  if (bytes > 0) std::memcpy(dst.data, src, bytes);
}

void ReferenceBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
  FOLIO_CHECK(bytes <= src.bytes());
  if (bytes > 0) std::memcpy(dst, src.data, bytes);
}

Buffer ReferenceBackend::load_weight(Tensor& w) {
  FOLIO_CHECK(w.device == Device::kCpu && w.layout == Layout::kGguf);
  return {};
}

void ReferenceBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  op_checks::embedding(table, ids, out, act_);
  FOLIO_CHECK(table.layout == Layout::kGguf);
  AsF32 o(out);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    std::int32_t id = ids.as<const std::int32_t>()[i];
    if (id < 0 || id >= table.rows()) fail("token id {} is outside the vocabulary of {}", id, table.rows());
    dequantize_row(table.dtype, table.row(id), o->as<float>() + i * o->cols(), table.cols());
  }
  o.store();
}

void ReferenceBackend::matmul(const Tensor& w, const Tensor& x, Tensor& y, const Tensor* bias) {
  op_checks::matmul(w, x, y, bias, act_);
  AsF32 xf(x), yf(y);
  std::vector<float> scratch;
  reference::matmul_rows(w, *xf, *yf, bias, 0, w.rows(), scratch);
  yf.store();
}

void ReferenceBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  op_checks::rms_norm(x, w, out, act_);
  AsF32 xf(x), of(out);
  const std::int64_t d = x.cols();
  for (std::int64_t r = 0; r < x.rows(); ++r) {
    const float* xr = xf->as<const float>() + r * d;
    float* o = of->as<float>() + r * d;
    float sum = 0.0f;
    for (std::int64_t i = 0; i < d; ++i) sum += xr[i] * xr[i];
    float inv = 1.0f / std::sqrt(sum / static_cast<float>(d) + eps);
    for (std::int64_t i = 0; i < d; ++i) o[i] = xr[i] * inv * w.as<const float>()[i];
  }
  of.store();
}

void ReferenceBackend::rope(Tensor& x, const Tensor& positions, const RopeTable& table) {
  op_checks::rope(x, positions, table, act_);
  AsF32 xf(x);
  const std::int64_t heads = x.shape[1], hd = x.shape[2], half = table.dim / 2;
  const float* inv_freq = table.inv_freq.as<const float>();
  for (std::int64_t t = 0; t < x.shape[0]; ++t) {
    float pos = static_cast<float>(positions.as<const std::int32_t>()[t]);
    const bool tempered = table.temperature_beta != 0.0f;
    const float temperature = tempered ? rope_temperature(table, pos) : 1.0f;
    for (std::int64_t h = 0; h < heads; ++h) {
      float* v = xf->as<float>() + (t * heads + h) * hd;
      for (std::int64_t i = 0; i < half; ++i) {
        float theta = pos * inv_freq[i];
        float c = std::cos(theta) * table.attention_factor;
        float s = std::sin(theta) * table.attention_factor;
        if (tempered) {
          c *= temperature;
          s *= temperature;
        }
        std::int64_t a = table.neox ? i : 2 * i;
        std::int64_t b = table.neox ? i + half : 2 * i + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
      if (tempered)
        for (std::int64_t d = table.dim; d < hd; ++d) v[d] *= temperature;
    }
  }
  xf.store();
}

void ReferenceBackend::glu(const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  op_checks::same_shape(gate, up, act_, "glu");
  op_checks::same_shape(gate, out, act_, "glu");
  AsF32 gf(gate), uf(up), of(out);
  for (std::int64_t i = 0; i < gate.numel(); ++i) {
    float g = gf->as<const float>()[i];
    float u = uf->as<const float>()[i];
    float a;
    if (act == GluActivation::kSilu) {
      a = g / (1.0f + std::exp(-g));
    } else if (act == GluActivation::kSigmoid) {
      a = 1.0f / (1.0f + std::exp(-g));
    } else if (act == GluActivation::kSwigluClamped) {
      g = std::min(g, kSwigluClampedLimit);
      u = std::clamp(u, -kSwigluClampedLimit, kSwigluClampedLimit) + 1.0f;
      a = g / (1.0f + std::exp(-kSwigluClampedAlpha * g));
    } else {
      // GELU, tanh approximation.
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      a = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g)));
    }
    of->as<float>()[i] = a * u;
  }
  of.store();
}

void ReferenceBackend::add(Tensor& x, const Tensor& y) {
  op_checks::same_shape(x, y, act_, "add");
  AsF32 xf(x), yf(y);
  for (std::int64_t i = 0; i < x.numel(); ++i) xf->as<float>()[i] += yf->as<const float>()[i];
  xf.store();
}

void ReferenceBackend::scale(Tensor& x, float s) {
  op_checks::activations(x, act_, "scale");
  AsF32 xf(x);
  for (std::int64_t i = 0; i < x.numel(); ++i) xf->as<float>()[i] *= s;
  xf.store();
}

void ReferenceBackend::scale_logits(Tensor& logits, float scale, float softcap) {
  op_checks::scale_logits(logits, scale, softcap);
  float* x = logits.as<float>();
  for (std::int64_t i = 0; i < logits.numel(); ++i) {
    x[i] *= scale;
    if (softcap > 0.0f) x[i] = softcap * std::tanh(x[i] / softcap);
  }
}

void ReferenceBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) {
  op_checks::write_kv(k, v, slot_mapping, kv, act_);
  AsF32 kf(k), vf(v);
  const std::int64_t heads = kv.num_kv_heads(), hd = kv.head_dim(), vd = kv.value_head_dim();
  for (std::int64_t t = 0; t < k.shape[0]; ++t) {
    std::int64_t slot = slot_mapping.as<const std::int32_t>()[t];
    if (slot < 0) continue;
    FOLIO_CHECK(slot < kv.num_blocks() * kv.block_size);
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t r = kv.row_of(slot, h);
      encode_kv_row(kv.k.type, kf->as<const float>() + (t * heads + h) * hd, hd, kv_rows::codes(kv.k, r),
                    kv_rows::scales(kv.k, r));
      encode_kv_row(kv.v.type, vf->as<const float>() + (t * heads + h) * vd, vd, kv_rows::codes(kv.v, r),
                    kv_rows::scales(kv.v, r));
    }
  }
}

void ReferenceBackend::attention(const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                                 const AttentionParams& params, Tensor& out) {
  op_checks::attention(q, kv, meta, params, out, act_);
  AsF32 qf(q), of(out);
  std::vector<float> scratch;
  reference::attention_items(*qf, kv, meta, params, *of, 0, q.shape[0] * q.shape[1], scratch);
  of.store();
}

void ReferenceBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  op_checks::gather_rows(x, rows, out);
  for (std::int64_t i = 0; i < rows.numel(); ++i) {
    std::int32_t r = rows.as<const std::int32_t>()[i];
    FOLIO_CHECK(r >= 0 && r < x.rows());
    std::memcpy(out.row(i), x.row(r), x.row_bytes());
  }
}

void ReferenceBackend::copy_blocks(PagedKv& kv, std::span<const std::pair<std::int32_t, std::int32_t>> pairs) {
  for (auto [src, dst] : pairs) {
    FOLIO_CHECK(src >= 0 && src < kv.num_blocks() && dst >= 0 && dst < kv.num_blocks());
    kv_rows::copy_block(kv.k, src, dst);
    kv_rows::copy_block(kv.v, src, dst);
  }
}

void ReferenceBackend::moe_route(const Tensor& router_logits, bool normalize, Tensor& ids, Tensor& weights) {
  op_checks::moe_route(router_logits, ids, weights, act_);
  AsF32 lf(router_logits);
  const std::int64_t E = router_logits.cols(), k = ids.cols();
  std::vector<float> probs(static_cast<std::size_t>(E));
  std::vector<bool> taken(static_cast<std::size_t>(E));
  for (std::int64_t t = 0; t < router_logits.rows(); ++t) {
    const float* logits = lf->as<const float>() + t * E;
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

void ReferenceBackend::moe_route_grouped(const Tensor& router_logits, const Tensor* selection_bias,
                                         const GroupedRouting& routing, Tensor& ids, Tensor& weights) {
  op_checks::moe_route_grouped(router_logits, selection_bias, routing, ids, weights, act_);
  AsF32 lf(router_logits);
  const std::int64_t E = router_logits.cols(), k = ids.cols(), G = routing.num_groups, per_group = E / G;
  std::vector<float> score(static_cast<std::size_t>(E)), choice(static_cast<std::size_t>(E));
  std::vector<float> group_score(static_cast<std::size_t>(G));
  std::vector<bool> available(static_cast<std::size_t>(E));
  const float* bias = selection_bias != nullptr ? selection_bias->as<const float>() : nullptr;
  for (std::int64_t t = 0; t < router_logits.rows(); ++t) {
    const float* logits = lf->as<const float>() + t * E;
    if (routing.sigmoid) {
      for (std::int64_t e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
    } else {
      float max_logit = -std::numeric_limits<float>::infinity();
      for (std::int64_t e = 0; e < E; ++e) max_logit = std::max(max_logit, logits[e]);
      float sum = 0.0f;
      for (std::int64_t e = 0; e < E; ++e) {
        score[e] = std::exp(logits[e] - max_logit);
        sum += score[e];
      }
      for (std::int64_t e = 0; e < E; ++e) score[e] /= sum;
    }
    for (std::int64_t e = 0; e < E; ++e) choice[e] = bias != nullptr ? score[e] + bias[e] : score[e];
    for (std::int64_t g = 0; g < G; ++g) {
      // The best choice score of the group, and with group_top2 the second best added.
      float first = -std::numeric_limits<float>::infinity(), second = first;
      for (std::int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
        if (choice[e] > first) {
          second = first;
          first = choice[e];
        } else if (choice[e] > second) {
          second = choice[e];
        }
      }
      group_score[g] = routing.group_top2 ? first + second : first;
    }
    for (std::int64_t g = 0; g < G; ++g) {
      // A group is kept when fewer than groups_used groups beat it (ties: the lower group wins).
      std::int64_t better = 0;
      for (std::int64_t o = 0; o < G; ++o)
        if (group_score[o] > group_score[g] || (group_score[o] == group_score[g] && o < g)) ++better;
      for (std::int64_t e = g * per_group; e < (g + 1) * per_group; ++e) available[e] = better < routing.groups_used;
    }
    std::int32_t* id = ids.as<std::int32_t>() + t * k;
    float* w = weights.as<float>() + t * k;
    float chosen = 0.0f;
    for (std::int64_t r = 0; r < k; ++r) {
      std::int64_t best = -1;
      for (std::int64_t e = 0; e < E; ++e)
        if (available[e] && (best < 0 || choice[e] > choice[best])) best = e;
      available[best] = false;
      id[r] = static_cast<std::int32_t>(best);
      w[r] = score[best];
      chosen += score[best];
    }
    for (std::int64_t r = 0; r < k; ++r) w[r] = (routing.normalize ? w[r] / chosen : w[r]) * routing.scale;
  }
}

void ReferenceBackend::concat_cols(const Tensor& a, const Tensor& b, Tensor& out) {
  op_checks::concat_cols(a, b, out, act_);
  const std::size_t a_bytes = a.row_bytes(), b_bytes = b.row_bytes(), out_bytes = out.row_bytes();
  for (std::int64_t r = 0; r < out.rows(); ++r) {
    auto* dst = static_cast<std::uint8_t*>(out.data) + static_cast<std::size_t>(r) * out_bytes;
    std::memcpy(dst, static_cast<const std::uint8_t*>(a.data) + static_cast<std::size_t>(r) * a_bytes, a_bytes);
    std::memcpy(dst + a_bytes, static_cast<const std::uint8_t*>(b.data) + static_cast<std::size_t>(r) * b_bytes,
                b_bytes);
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

void ReferenceBackend::expert_matmul(const Tensor& w, const Tensor& x, const Tensor& offsets, Tensor& y,
                                     const Tensor* bias) {
  op_checks::expert_matmul(w, x, offsets, y, bias, act_);
  AsF32 xf(x), yf(y);
  std::vector<float> scratch;
  for (std::int64_t e = 0; e < w.shape[0]; ++e) {
    const auto [begin, end] = reference::expert_rows(offsets, e, x.rows());
    if (begin == end) continue;
    Tensor xe = xf->rows_view(begin, end - begin), ye = yf->rows_view(begin, end - begin);
    const Tensor we = expert_weight(w, e);
    const Tensor be = bias != nullptr ? expert_bias(*bias, e) : Tensor();
    reference::matmul_rows(we, xe, ye, bias != nullptr ? &be : nullptr, 0, we.rows(), scratch);
  }
  yf.store();
}

void ReferenceBackend::moe_combine(const Tensor& y, const Tensor& assignment_rows, const Tensor& weights, Tensor& out) {
  op_checks::moe_combine(y, assignment_rows, weights, out, act_);
  AsF32 yf(y), of(out);
  reference::moe_combine_tokens(*yf, assignment_rows, weights, *of, 0, out.rows());
  of.store();
}

void ReferenceBackend::add_sigmoid_gated(Tensor& x, const Tensor& y, const Tensor& gate) {
  op_checks::add_sigmoid_gated(x, y, gate, act_);
  AsF32 xf(x), yf(y), gf(gate);
  const std::int64_t d = x.cols();
  for (std::int64_t t = 0; t < x.rows(); ++t) {
    const float g = 1.0f / (1.0f + std::exp(-gf->as<const float>()[t]));
    for (std::int64_t c = 0; c < d; ++c) xf->as<float>()[t * d + c] += g * yf->as<const float>()[t * d + c];
  }
  xf.store();
}

void ReferenceBackend::causal_conv1d(const Tensor& x, const Tensor& w, const AttentionMetadata& meta,
                                     const Tensor& state_slots, RecurrentState& state, Tensor& out) {
  op_checks::causal_conv1d(x, w, meta, state_slots, state, out, act_);
  AsF32 xf(x), of(out);
  reference::causal_conv1d_seqs(*xf, w, meta, state_slots, state, *of, 0, meta.num_seqs);
  of.store();
}

void ReferenceBackend::gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b,
                                        const DeltaRuleParams& params, const AttentionMetadata& meta,
                                        const Tensor& state_slots, RecurrentState& state, Tensor& out) {
  op_checks::gated_delta_rule(qkv, a, b, params, meta, state_slots, state, out, act_);
  AsF32 qf(qkv), af(a), bf(b), of(out);
  reference::gated_delta_rule_seqs(*qf, *af, *bf, params, meta, state_slots, state, *of, 0, meta.num_seqs);
  of.store();
}

void ReferenceBackend::sample(const Tensor& logits, const SamplingBatch& batch) {
  op_checks::sample(logits, batch);
  reference::sample_rows(logits, batch, 0, batch.num_rows, sampler_);
}

}  // namespace folio
