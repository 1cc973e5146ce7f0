#include "backend/cpu/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "backend/cpu/cpu_features.h"
#include "core/error.h"
#include "tensor/fp8.h"
#include "tensor/half.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#pragma clang fp contract(off)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
// Only the FMAs written as intrinsics: plain a * b + c stays two roundings,
// as in the reference.
#pragma GCC optimize("fp-contract=off")
#endif
#include "backend/cpu/simd_math.h"

namespace folio {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A pool as the kernel reads it: rows of codes and their scales, and the
// function that decodes consecutive rows to floats.
struct PoolView;
using RowDecoder = void (*)(const PoolView& pool, std::int64_t first, std::int64_t count, std::int64_t n,
                            float* out);

struct PoolView {
  const std::uint8_t* codes;   // [rows][row_bytes]
  const std::uint16_t* scales; // [rows][row_scales] or null
  std::int64_t row_bytes, row_scales;
  RowDecoder decode;
  // Rows [first, first + count), n numbers each, to out[count][n]: one call
  // per run of rows (a call per row of 64 numbers cost more than decoding it).
  void rows(std::int64_t first, std::int64_t count, std::int64_t n, float* out) const {
    decode(*this, first, count, n, out);
  }
  const std::uint8_t* codes_of(std::int64_t r) const { return codes + r * row_bytes; }
  const std::uint16_t* scales_of(std::int64_t r) const { return scales + r * row_scales; }
};

// Query tokens of one sequence that one pass over a partition serves: the
// K and V rows are decoded once for all of them (speculative verification,
// prefill chunks).
constexpr int kMaxQueries = 8;

struct QueryArgs {
  const float* q;            // [group][head_dim] the query heads of one KV head
  std::int64_t end;          // positions [begin, end) of the partition that it may see
  std::int64_t window_start; // positions before it are masked (sliding window)
  float* partial;            // [group][2 + value_head_dim]: m, l, acc
};

struct PartitionArgs {
  int group;               // query heads per KV head
  PoolView k_pool;         // rows of [num_blocks, kv_heads, block_size]
  PoolView v_pool;
  const std::int32_t* table;
  std::int64_t block_size, kv_heads, kv_head, head_dim, value_head_dim;
  std::int64_t begin;      // first position of the partition (every query sees it)
  float scale, softcap;
  int num_queries;         // 1 .. kMaxQueries, in position order
  QueryArgs queries[kMaxQueries];
};

// Row decoders, one per cache type: 8 lanes at a time, each number
// code * scale in one rounding, as tensor/kv_dtype.cc's decode_kv_row.
template <DType T>
void decode_plain_row(const std::uint8_t* codes, std::int64_t n, float* out) {
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8) _mm256_storeu_ps(out + d, simd::load8<T>(codes, d));
  for (; d < n; ++d) {
    if constexpr (T == DType::F32) {
      out[d] = reinterpret_cast<const float*>(codes)[d];
    } else {
      // A scalar tail converts through the same 8-lane path, one lane used.
      alignas(32) std::uint16_t tmp[8] = {reinterpret_cast<const std::uint16_t*>(codes)[d]};
      alignas(32) float f[8];
      _mm256_store_ps(f, simd::load8<T>(tmp, 0));
      out[d] = f[0];
    }
  }
}

template <DType T>
void decode_plain(const PoolView& pool, std::int64_t first, std::int64_t count, std::int64_t n, float* out) {
  // Rows without padding are one run of numbers, decoded in one pass.
  if (pool.row_bytes == n * (T == DType::F32 ? 4 : 2)) return decode_plain_row<T>(pool.codes_of(first), n * count, out);
  for (std::int64_t r = 0; r < count; ++r) decode_plain_row<T>(pool.codes_of(first + r), n, out + r * n);
}

// q8_0: one f16 scale per block of 32 numbers (kv_dim_problem guarantees
// whole blocks).
void decode_q8(const PoolView& pool, std::int64_t first, std::int64_t count, std::int64_t n, float* out) {
  for (std::int64_t r = 0; r < count; ++r, out += n) {
    const std::uint8_t* codes = pool.codes_of(first + r);
    const std::uint16_t* scales = pool.scales_of(first + r);
    for (std::int64_t b = 0; b < n / 32; ++b) {
      const __m256 d = _mm256_set1_ps(f16_to_f32(scales[b]));
      for (std::int64_t i = 32 * b; i < 32 * (b + 1); i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(simd::load8_i8(codes + i), d));
    }
  }
}

// fp8_e4m3: one f16 scale for the row. (code / 256) x (256 d) is the same
// real number as code x d, both factors exact, so it rounds the same.
void decode_fp8(const PoolView& pool, std::int64_t first, std::int64_t count, std::int64_t n, float* out) {
  const float* table = fp8_e4m3_table().data();
  for (std::int64_t r = 0; r < count; ++r, out += n) {
    const std::uint8_t* codes = pool.codes_of(first + r);
    const float ds = f16_to_f32(pool.scales_of(first + r)[0]);
    const __m256 d256 = _mm256_set1_ps(ds * 256.0f);
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(simd::load8_fp8_over_256(codes + i), d256));
    for (; i < n; ++i) out[i] = table[codes[i]] * ds;
  }
}

RowDecoder decoder_for(KvDType t) {
  switch (t) {
    case KvDType::kF32: return decode_plain<DType::F32>;
    case KvDType::kF16: return decode_plain<DType::F16>;
    case KvDType::kBF16: return decode_plain<DType::BF16>;
    case KvDType::kQ8_0: return decode_q8;
    case KvDType::kFp8E4M3: return decode_fp8;
  }
  fail("KV cache type {} has no CPU attention kernel", name(t));
}

PoolView view_of(const KvPool& p) {
  return {static_cast<const std::uint8_t*>(p.codes.data), static_cast<const std::uint16_t*>(p.scales.data),
          p.row_bytes(), p.row_scales(), decoder_for(p.type)};
}

// acc[0, n) = acc * c + p * v
inline void axpby(float* acc, float c, float p, const float* v, std::int64_t n) {
  const __m256 cv = _mm256_set1_ps(c), pv = _mm256_set1_ps(p);
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + d), _mm256_mul_ps(cv, _mm256_loadu_ps(acc + d))));
  for (; d < n; ++d) acc[d] = p * v[d] + c * acc[d];
}

// Dot products of one query head with 8 keys (rows of `keys`, `stride` floats
// apart). Each is computed alone, the same way whichever keys and queries
// share the call: 8 lanes, one fused multiply-add per 8 dimensions in order,
// the lanes summed as simd::hsum sums them, then the scalar tail. Summing the
// eight keys' lanes in one transpose costs less than eight hsums.
inline void dot8(const float* q, const float* keys, std::int64_t stride, std::int64_t n, float* out) {
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const std::int64_t n8 = n / 8 * 8;
  for (std::int64_t d = 0; d < n8; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int k = 0; k < 8; ++k) acc[k] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(keys + k * stride + d), acc[k]);
  }
  // hsum's order per key: (lo + hi), then lanes (0 + 2, 1 + 3), then 0 + 1.
  __m256 half[4];  // [key 2i: lanes 0-3 | key 2i+1: lanes 0-3], each lo + hi
  for (int i = 0; i < 4; ++i)
    half[i] = _mm256_add_ps(_mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x20),
                            _mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x31));
  __m256 quarter[2];  // per 128-bit lane: [key a: l0+l2, l1+l3, key b: l0+l2, l1+l3]
  for (int i = 0; i < 2; ++i)
    quarter[i] = _mm256_add_ps(_mm256_shuffle_ps(half[2 * i], half[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                               _mm256_shuffle_ps(half[2 * i], half[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // Lanes now hold keys 0, 2, 4, 6, 1, 3, 5, 7.
  const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(quarter[0], quarter[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm256_shuffle_ps(quarter[0], quarter[1], _MM_SHUFFLE(3, 1, 3, 1)));
  _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  for (int k = 0; k < 8; ++k)
    for (std::int64_t d = n8; d < n; ++d) out[k] += q[d] * keys[k * stride + d];
}

// V vectors (8 V floats) of acc: acc = acc * c, then acc += p[r] * rows[r]
// for r in [0, count), in registers.
template <int V>
inline void accumulate_vectors(float* acc, __m256 c, const float* p, const float* rows, std::int64_t stride,
                               std::int64_t count) {
  __m256 a[V];
  for (int v = 0; v < V; ++v) a[v] = _mm256_mul_ps(c, _mm256_loadu_ps(acc + 8 * v));
  for (std::int64_t r = 0; r < count; ++r) {
    const __m256 pv = _mm256_set1_ps(p[r]);
    const float* row = rows + r * stride;
    for (int v = 0; v < V; ++v) a[v] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(row + 8 * v), a[v]);
  }
  for (int v = 0; v < V; ++v) _mm256_storeu_ps(acc + 8 * v, a[v]);
}

// acc = acc * c, then acc += p[r] * rows[r] for r in [0, count): axpby's
// operations in its order, each element on its own.
inline void accumulate_rows(float* acc, float c, const float* p, const float* rows, std::int64_t stride,
                            std::int64_t count, std::int64_t n) {
  const __m256 cv = _mm256_set1_ps(c);
  std::int64_t d = 0;
  for (; d + 64 <= n; d += 64) accumulate_vectors<8>(acc + d, cv, p, rows + d, stride, count);
  for (; d + 8 <= n; d += 8) accumulate_vectors<1>(acc + d, cv, p, rows + d, stride, count);
  for (; d < n; ++d)
    for (std::int64_t r = 0; r < count; ++r) acc[d] = p[r] * rows[r * stride + d] + (r == 0 ? c : 1.0f) * acc[d];
}

// One partition of one KV head for up to kMaxQueries query tokens: online
// softmax over the blocks, in position order, one run of positions within a
// block at a time. Each query sees the runs it would see alone - cut at block
// edges, kMaxRun positions and its own end - and the same float operations
// in the same order; only the decoding of K and V rows is shared.
void partition(const PartitionArgs& a) {
  constexpr int kMaxRun = 64;
  const std::int64_t hd = a.head_dim, vd = a.value_head_dim, bs = a.block_size;
  const int G = a.group, Q = a.num_queries;
  // Decoded K (then V) rows of one run, and room for dot8's padding: on the
  // stack for head sizes up to 256, uninitialised (every row read is written).
  constexpr std::int64_t kStackFloats = (kMaxRun + 8) * 256;
  float stack_rows[kStackFloats];
  const std::int64_t need = (kMaxRun + 8) * std::max(hd, vd);
  std::unique_ptr<float[]> heap_rows(need > kStackFloats ? new float[static_cast<std::size_t>(need)] : nullptr);
  float* const rows = need > kStackFloats ? heap_rows.get() : stack_rows;
  float scores[kMaxQueries][16][kMaxRun + 8];  // [query][head][position in run]
  std::int64_t last_end = a.begin;
  for (int qi = 0; qi < Q; ++qi) {
    last_end = std::max(last_end, a.queries[qi].end);
    for (int h = 0; h < G; ++h) {
      float* p = a.queries[qi].partial + h * (2 + vd);
      p[0] = kNegInf;
      p[1] = 0.0f;
      std::fill(p + 2, p + 2 + vd, 0.0f);
    }
  }
  for (std::int64_t j = a.begin; j < last_end;) {
    const std::int64_t block = a.table[j / bs];
    const std::int64_t offset = j % bs;
    const std::int64_t chunk = std::min({bs - offset, last_end - j, static_cast<std::int64_t>(kMaxRun)});
    const std::int64_t first_row = (block * a.kv_heads + a.kv_head) * bs + offset;
    std::int64_t run[kMaxQueries];  // this query's positions in the chunk
    for (int qi = 0; qi < Q; ++qi) run[qi] = std::clamp<std::int64_t>(a.queries[qi].end - j, 0, chunk);
    // The chunk's keys, then its scores eight keys at a time (rows past the
    // chunk are zeros whose scores nobody reads).
    const std::int64_t padded = (chunk + 7) / 8 * 8;
    a.k_pool.rows(first_row, chunk, hd, rows);
    std::fill(rows + chunk * hd, rows + padded * hd, 0.0f);
    for (int qi = 0; qi < Q; ++qi) {
      const QueryArgs& qa = a.queries[qi];
      for (int h = 0; h < G; ++h) {
        float* sc = scores[qi][h];
        for (std::int64_t r = 0; r < run[qi]; r += 8) dot8(qa.q + h * hd, rows + r * hd, hd, hd, sc + r);
        for (std::int64_t r = 0; r < run[qi]; ++r) {
          float s = sc[r] * a.scale;
          if (a.softcap > 0.0f) s = a.softcap * std::tanh(s / a.softcap);
          sc[r] = j + r < qa.window_start ? kNegInf : s;
        }
      }
    }
    // Per query and head: the new running max, the correction of what came
    // before, and the weights of this run's positions.
    float correction[kMaxQueries][16];
    for (int qi = 0; qi < Q; ++qi) {
      const std::int64_t n = run[qi];
      if (n == 0) continue;
      for (int h = 0; h < G; ++h) {
        float* p = a.queries[qi].partial + h * (2 + vd);
        float* sc = scores[qi][h];
        float run_max = kNegInf;
        for (std::int64_t r = 0; r < n; ++r) run_max = std::max(run_max, sc[r]);
        const float m_new = std::max(p[0], run_max);
        if (m_new == kNegInf) {  // all masked so far
          correction[qi][h] = 1.0f;
          for (std::int64_t r = 0; r < n; ++r) sc[r] = 0.0f;
          continue;
        }
        std::int64_t r = 0;
        for (; r + 8 <= n; r += 8)
          _mm256_storeu_ps(sc + r, simd::exp(_mm256_sub_ps(_mm256_loadu_ps(sc + r), _mm256_set1_ps(m_new))));
        if (r < n) {
          alignas(32) float tail[8];
          for (int i = 0; i < 8; ++i) tail[i] = r + i < n ? sc[r + i] - m_new : kNegInf;
          _mm256_store_ps(tail, simd::exp(_mm256_load_ps(tail)));
          for (std::int64_t i = 0; r + i < n; ++i) sc[r + i] = tail[i];
        }
        alignas(32) float old[8] = {p[0] - m_new};
        _mm256_store_ps(old, simd::exp(_mm256_load_ps(old)));
        correction[qi][h] = p[0] == kNegInf ? 0.0f : old[0];
        float sum = 0.0f;
        for (std::int64_t i = 0; i < n; ++i) sum += sc[i];
        p[0] = m_new;
        p[1] = p[1] * correction[qi][h] + sum;
      }
    }
    a.v_pool.rows(first_row, chunk, vd, rows);
    for (int qi = 0; qi < Q; ++qi) {
      if (run[qi] == 0) continue;
      for (int h = 0; h < G; ++h)
        accumulate_rows(a.queries[qi].partial + h * (2 + vd) + 2, correction[qi][h], scores[qi][h], rows, vd,
                        run[qi], vd);
    }
    j += chunk;
  }
}

// out[0, vd) = sum_p e^(m_p - M) acc_p / sum_p e^(m_p - M) l_p over the
// partials of one head, in partition order. An attention sink is one more
// partial after them, with m = the sink, l = 1 and no value: it joins M and
// the denominator only.
void merge(const float* first, std::int64_t count, std::int64_t stride, std::int64_t vd, const float* sink,
           float* out) {
  float m = kNegInf;
  for (std::int64_t p = 0; p < count; ++p) m = std::max(m, first[p * stride]);
  if (sink != nullptr) m = std::max(m, *sink);
  std::fill(out, out + vd, 0.0f);
  if (m == kNegInf) return;  // nothing visible (cannot happen for a causal query)
  float l = 0.0f;
  for (std::int64_t p = 0; p < count; ++p) {
    const float* part = first + p * stride;
    alignas(32) float w[8] = {part[0] - m};
    _mm256_store_ps(w, simd::exp(_mm256_load_ps(w)));
    const float weight = part[0] == kNegInf ? 0.0f : w[0];
    l += weight * part[1];
    axpby(out, 1.0f, weight, part + 2, vd);
  }
  if (sink != nullptr) {
    alignas(32) float w[8] = {*sink - m};
    _mm256_store_ps(w, simd::exp(_mm256_load_ps(w)));
    l += w[0];
  }
  const float inv = 1.0f / l;
  for (std::int64_t d = 0; d < vd; ++d) out[d] *= inv;
}

}  // namespace
}  // namespace folio

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace folio {

bool CpuAttention::supported() { return CpuFeatures::detect().avx2; }

void CpuAttention::run(ThreadPool& pool, const Tensor& q, const PagedKv& kv, const AttentionMetadata& meta,
                       const AttentionParams& params, Tensor& out) {
  const std::int64_t T = q.shape[0], heads = q.shape[1], hd = q.shape[2];
  const std::int64_t kv_heads = kv.num_kv_heads(), vd = kv.value_head_dim();
  const std::int64_t G = heads / kv_heads;
  if (hd > 1024 || vd > 1024 || G > 16)
    fail("CPU attention supports head sizes up to 1024 and up to 16 query heads per KV head (got {}, {}, {})", hd,
         vd, G);
  const auto* query_start = meta.query_start.as<const std::int32_t>();
  const auto* positions = meta.positions.as<const std::int32_t>();
  const auto* seq_lens = meta.seq_lens.as<const std::int32_t>();

  // Each token's partials: per KV head, per partition of its context, per
  // query head of the KV head.
  const std::int64_t stride = 2 + vd;
  partial_base_.assign(static_cast<std::size_t>(T + 1), 0);
  for (std::int64_t t = 0; t < T; ++t)
    partial_base_[t + 1] = partial_base_[t] + kv_heads * (positions[t] / kAttentionPartition + 1) * G;
  if (static_cast<std::int64_t>(partials_.size()) < partial_base_[T] * stride)
    partials_.resize(static_cast<std::size_t>(partial_base_[T] * stride));
  auto partial_of = [&](std::int64_t t, std::int64_t g, std::int64_t p) {
    return partials_.data() + (partial_base_[t] + (g * (positions[t] / kAttentionPartition + 1) + p) * G) * stride;
  };

  // The work: per sequence, groups of up to kMaxQueries consecutive query
  // tokens (one with a sliding window: its partitions start where its window
  // does), per KV head, per partition that the group's last token reaches;
  // a token takes part in the partitions its position reaches.
  items_.clear();
  const std::int64_t per_item = params.sliding_window > 0 ? 1 : kMaxQueries;
  for (std::int64_t s = 0; s < meta.num_seqs; ++s) {
    for (std::int64_t t0 = query_start[s]; t0 < query_start[s + 1]; t0 += per_item) {
      const std::int64_t t1 = std::min<std::int64_t>(query_start[s + 1], t0 + per_item);
      std::int64_t last_pos = 0;
      for (std::int64_t t = t0; t < t1; ++t) {
        FOLIO_CHECK(positions[t] < seq_lens[s]);
        last_pos = std::max<std::int64_t>(last_pos, positions[t]);
      }
      for (std::int64_t g = 0; g < kv_heads; ++g)
        for (std::int64_t p = 0; p <= last_pos / kAttentionPartition; ++p)
          items_.push_back({static_cast<std::int32_t>(t0), static_cast<std::int32_t>(t1 - t0),
                            static_cast<std::int32_t>(s), static_cast<std::int32_t>(g), static_cast<std::int32_t>(p)});
    }
  }

  const PoolView k_pool = view_of(kv.k), v_pool = view_of(kv.v);
  const auto num_items = static_cast<std::int64_t>(items_.size());
  pool.parallel_for(num_items, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const Item& it = items_[static_cast<std::size_t>(i)];
      PartitionArgs a;
      a.group = static_cast<int>(G);
      a.k_pool = k_pool;
      a.v_pool = v_pool;
      a.table = meta.block_tables.as<const std::int32_t>() + it.seq * meta.max_blocks_per_seq;
      a.block_size = kv.block_size;
      a.kv_heads = kv_heads;
      a.kv_head = it.kv_head;
      a.head_dim = hd;
      a.value_head_dim = vd;
      a.scale = params.scale;
      a.softcap = params.softcap;
      a.num_queries = 0;
      const std::int64_t partition_begin = it.partition * kAttentionPartition;
      a.begin = partition_begin;
      for (std::int64_t t = it.token; t < it.token + it.num_tokens; ++t) {
        const std::int64_t pos = positions[t];
        if (pos / kAttentionPartition < it.partition) continue;  // the token's context ends before it
        QueryArgs& qa = a.queries[a.num_queries];
        qa.q = q.as<const float>() + (t * heads + it.kv_head * G) * hd;
        qa.window_start = params.sliding_window > 0 ? std::max<std::int64_t>(0, pos - params.sliding_window + 1) : 0;
        qa.end = std::min<std::int64_t>(partition_begin + kAttentionPartition, pos + 1);
        qa.partial = partial_of(t, it.kv_head, it.partition);
        // A partition wholly before the window is skipped (no block read);
        // only a group of one token has a window.
        const std::int64_t start = std::max<std::int64_t>(partition_begin, qa.window_start / kv.block_size * kv.block_size);
        if (start >= qa.end) {
          for (std::int64_t h = 0; h < G; ++h) {
            qa.partial[h * stride] = kNegInf;
            qa.partial[h * stride + 1] = 0.0f;
          }
          continue;
        }
        a.begin = start;
        ++a.num_queries;
      }
      if (a.num_queries > 0) partition(a);
    }
  });
  // Merge each head's partitions, in order, and its sink.
  const float* sinks = params.sinks.data != nullptr ? params.sinks.as<const float>() : nullptr;
  pool.parallel_for(T * heads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t t = i / heads, h = i % heads, g = h / G;
      const std::int64_t parts = positions[t] / kAttentionPartition + 1;
      merge(partial_of(t, g, 0) + (h % G) * stride, parts, G * stride, vd, sinks != nullptr ? sinks + h : nullptr,
            out.as<float>() + (t * heads + h) * vd);
    }
  });
}

}  // namespace folio
