// The reference of linear attention (gated DeltaNet): the causal
// convolution and the gated delta rule, sequence by sequence in token order,
// in f32 - the loops the CPU backend splits over sequences for the same bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/reference/reference_backend.h"
#include "core/error.h"

namespace folio::reference {
namespace {

// Sequence s's tokens [begin, end), its state slot (negative: padding), and
// whether it starts from zeros (its first token this step is at position 0).
struct SeqSpan {
  std::int64_t begin = 0, end = 0, slot = -1;
  bool fresh = false;
};

SeqSpan seq_span(const AttentionMetadata& meta, const Tensor& state_slots, std::int64_t num_slots, std::int64_t s,
                 const char* op) {
  const auto* qs = meta.query_start.as<const std::int32_t>();
  SeqSpan span{qs[s], qs[s + 1], state_slots.as<const std::int32_t>()[s], false};
  if (span.begin < 0 || span.end < span.begin || span.end > meta.num_tokens)
    fail("backend op {}: sequence {} has tokens [{}, {}) of a step of {}", op, s, span.begin, span.end,
         meta.num_tokens);
  if (span.slot >= num_slots) fail("backend op {}: sequence {} has state slot {} of {}", op, s, span.slot, num_slots);
  if (span.end > span.begin) span.fresh = meta.positions.as<const std::int32_t>()[span.begin] == 0;
  return span;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch's softplus (beta 1, threshold 20).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x[0, n) scaled to unit length: x * 1 / sqrt(sum x^2 + 1e-6).
void l2_normalize(float* x, std::int64_t n) {
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum + 1e-6f);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

void causal_conv1d_seqs(const Tensor& x, const Tensor& w, const AttentionMetadata& meta, const Tensor& state_slots,
                        RecurrentState& state, Tensor& out, std::int64_t seq_begin, std::int64_t seq_end) {
  const std::int64_t C = x.cols(), K = w.cols(), W = K - 1;
  const float* wv = w.as<const float>();  // [channels, kernel]
  std::vector<float> rows;                // [window + tokens, channels] the inputs in order
  for (std::int64_t s = seq_begin; s < seq_end; ++s) {
    const SeqSpan span = seq_span(meta, state_slots, state.conv.shape[0], s, "causal_conv1d");
    if (span.slot < 0) std::fill(out.as<float>() + span.begin * C, out.as<float>() + span.end * C, 0.0f);
    if (span.slot < 0 || span.end == span.begin) continue;
    const std::int64_t n = span.end - span.begin;
    float* window = state.conv.as<float>() + span.slot * W * C;  // [kernel - 1, channels]
    rows.assign(static_cast<std::size_t>((W + n) * C), 0.0f);
    if (!span.fresh) std::copy(window, window + W * C, rows.begin());
    std::copy(x.as<const float>() + span.begin * C, x.as<const float>() + span.end * C, rows.begin() + W * C);
    for (std::int64_t t = 0; t < n; ++t) {
      float* o = out.as<float>() + (span.begin + t) * C;
      for (std::int64_t c = 0; c < C; ++c) {
        float sum = 0.0f;
        for (std::int64_t j = 0; j < K; ++j) sum += wv[c * K + j] * rows[static_cast<std::size_t>((t + j) * C + c)];
        o[c] = silu(sum);
      }
    }
    std::copy(rows.end() - W * C, rows.end(), window);
  }
}

void gated_delta_rule_seqs(const Tensor& qkv, const Tensor& a, const Tensor& b, const DeltaRuleParams& p,
                           const AttentionMetadata& meta, const Tensor& state_slots, RecurrentState& state,
                           Tensor& out, std::int64_t seq_begin, std::int64_t seq_end) {
  const std::int64_t nv = state.num_value_heads(), dk = state.key_dim(), dv = state.value_dim();
  const std::int64_t nk = p.num_key_heads, group = nv / nk, cols = qkv.cols();
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const float* decay = p.decay.as<const float>();
  const float* dt_bias = p.dt_bias.as<const float>();
  std::vector<float> q(static_cast<std::size_t>(nk * dk)), k(static_cast<std::size_t>(nk * dk));
  std::vector<float> kv_mem(static_cast<std::size_t>(dv));
  for (std::int64_t s = seq_begin; s < seq_end; ++s) {
    const SeqSpan span = seq_span(meta, state_slots, state.state.shape[0], s, "gated_delta_rule");
    if (span.slot < 0)
      std::fill(out.as<float>() + span.begin * nv * dv, out.as<float>() + span.end * nv * dv, 0.0f);
    if (span.slot < 0 || span.end == span.begin) continue;
    float* slot = state.state.as<float>() + span.slot * nv * dk * dv;  // [value_heads, key_dim, value_dim]
    if (span.fresh) std::fill(slot, slot + nv * dk * dv, 0.0f);
    for (std::int64_t t = span.begin; t < span.end; ++t) {
      const float* row = qkv.as<const float>() + t * cols;  // [q heads | k heads | v heads]
      std::copy(row, row + nk * dk, q.begin());
      std::copy(row + nk * dk, row + 2 * nk * dk, k.begin());
      for (std::int64_t h = 0; h < nk; ++h) {
        l2_normalize(q.data() + h * dk, dk);
        l2_normalize(k.data() + h * dk, dk);
        for (std::int64_t i = 0; i < dk; ++i) q[static_cast<std::size_t>(h * dk + i)] *= q_scale;
      }
      const float* v_all = row + 2 * nk * dk;
      for (std::int64_t h = 0; h < nv; ++h) {
        const std::int64_t kh = p.tiled_heads ? h % nk : h / group;
        const float* qh = q.data() + kh * dk;
        const float* kh_vec = k.data() + kh * dk;
        const float* vh = v_all + h * dv;
        const float g = decay[h] * softplus(a.as<const float>()[t * nv + h] + dt_bias[h]);
        const float beta = sigmoid(b.as<const float>()[t * nv + h]);
        const float factor = std::exp(g);
        float* S = slot + h * dk * dv;  // [key_dim, value_dim]
        for (std::int64_t i = 0; i < dk * dv; ++i) S[i] *= factor;
        std::fill(kv_mem.begin(), kv_mem.end(), 0.0f);
        for (std::int64_t i = 0; i < dk; ++i)
          for (std::int64_t j = 0; j < dv; ++j) kv_mem[static_cast<std::size_t>(j)] += S[i * dv + j] * kh_vec[i];
        for (std::int64_t j = 0; j < dv; ++j)
          kv_mem[static_cast<std::size_t>(j)] = (vh[j] - kv_mem[static_cast<std::size_t>(j)]) * beta;  // delta
        for (std::int64_t i = 0; i < dk; ++i)
          for (std::int64_t j = 0; j < dv; ++j) S[i * dv + j] += kh_vec[i] * kv_mem[static_cast<std::size_t>(j)];
        float* o = out.as<float>() + (t * nv + h) * dv;
        for (std::int64_t j = 0; j < dv; ++j) {
          float sum = 0.0f;
          for (std::int64_t i = 0; i < dk; ++i) sum += S[i * dv + j] * qh[i];
          o[j] = sum;
        }
      }
    }
  }
}

}  // namespace folio::reference
