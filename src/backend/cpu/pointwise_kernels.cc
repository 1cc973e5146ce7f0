#include "backend/cpu/pointwise_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/reference/kv_rows.h"
#include "core/error.h"
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

namespace folio::cpu_pointwise {
namespace {

// Rows per chunk so that a chunk holds at least ~16K elements (or everything).
std::int64_t grain_rows(std::int64_t cols) { return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(cols, 1)); }

// Stores 8 floats as the cache's element type.
inline void store8(DType t, void* base, std::int64_t index, __m256 v) {
  if (t == DType::F32) {
    _mm256_storeu_ps(static_cast<float*>(base) + index, v);
  } else if (t == DType::F16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<std::uint16_t*>(base) + index),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  } else {
    alignas(32) float f[8];
    _mm256_store_ps(f, v);
    for (int i = 0; i < 8; ++i) static_cast<std::uint16_t*>(base)[index + i] = f32_to_bf16(f[i]);
  }
}

inline void store1(DType t, void* base, std::int64_t index, float v) {
  if (t == DType::F32) {
    static_cast<float*>(base)[index] = v;
  } else if (t == DType::F16) {
    static_cast<std::uint16_t*>(base)[index] = f32_to_f16(v);
  } else {
    static_cast<std::uint16_t*>(base)[index] = f32_to_bf16(v);
  }
}

// Copies n floats into a cache row of type t.
void store_row(DType t, void* base, std::int64_t index, const float* src, std::int64_t n) {
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8) store8(t, base, index + d, _mm256_loadu_ps(src + d));
  for (; d < n; ++d) store1(t, base, index + d, src[d]);
}

inline __m256 silu(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(g, _mm256_add_ps(one, simd::exp(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

// GELU with the tanh approximation; tanh(y) = 1 - 2 / (e^(2y) + 1).
inline __m256 gelu_tanh(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), two = _mm256_set1_ps(2.0f);
  const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
  const __m256 y = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                 _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
  const __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(simd::exp(_mm256_mul_ps(two, y)), one)));
  return _mm256_mul_ps(_mm256_mul_ps(half, g), _mm256_add_ps(one, t));
}

// gpt-oss's clamped SwiGLU, the reference's operations lane by lane:
// g = min(g, limit), u = clamp(u, -limit, limit) + 1, g / (1 + e^(-alpha g)) * u.
inline __m256 swiglu_clamped(__m256 g, __m256 u) {
  const __m256 one = _mm256_set1_ps(1.0f), limit = _mm256_set1_ps(kSwigluClampedLimit);
  g = _mm256_min_ps(g, limit);
  u = _mm256_add_ps(_mm256_min_ps(_mm256_max_ps(u, _mm256_set1_ps(-kSwigluClampedLimit)), limit), one);
  const __m256 e = simd::exp(_mm256_mul_ps(_mm256_set1_ps(-kSwigluClampedAlpha), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
}

}  // namespace

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  const std::int64_t d = x.cols();
  pool.parallel_for(x.rows(), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* xr = x.as<const float>() + r * d;
      float* o = out.as<float>() + r * d;
      __m256 acc = _mm256_setzero_ps();
      std::int64_t i = 0;
      for (; i + 8 <= d; i += 8) {
        const __m256 v = _mm256_loadu_ps(xr + i);
        acc = _mm256_fmadd_ps(v, v, acc);
      }
      float sum = simd::hsum(acc);
      for (; i < d; ++i) sum += xr[i] * xr[i];
      const float inv = 1.0f / std::sqrt(sum / static_cast<float>(d) + eps);
      const __m256 iv = _mm256_set1_ps(inv);
      i = 0;
      for (; i + 8 <= d; i += 8)
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), iv),
                                              _mm256_loadu_ps(w.as<const float>() + i)));
      for (; i < d; ++i) o[i] = xr[i] * inv * w.as<const float>()[i];
    }
  }, grain_rows(d));
}

void rope(ThreadPool& pool, Tensor& x, const Tensor& positions, const RopeTable& table) {
  const std::int64_t heads = x.shape[1], hd = x.shape[2], half = table.dim / 2;
  pool.parallel_for(x.shape[0], [&](std::int64_t begin, std::int64_t end) {
    float cs[512], sn[512];
    const bool tempered = table.temperature_beta != 0.0f;
    for (std::int64_t t = begin; t < end; ++t) {
      const float pos = static_cast<float>(positions.as<const std::int32_t>()[t]);
      const float temperature = tempered ? rope_temperature(table, pos) : 1.0f;
      // The angles once per token, for every head.
      for (std::int64_t i = 0; i < half; ++i) {
        const float theta = pos * table.inv_freq.as<const float>()[i];
        cs[i] = std::cos(theta) * table.attention_factor;
        sn[i] = std::sin(theta) * table.attention_factor;
        if (tempered) {
          cs[i] *= temperature;
          sn[i] *= temperature;
        }
      }
      for (std::int64_t h = 0; h < heads; ++h) {
        float* v = x.as<float>() + (t * heads + h) * hd;
        for (std::int64_t i = 0; i < half; ++i) {
          const std::int64_t a = table.neox ? i : 2 * i;
          const std::int64_t b = table.neox ? i + half : 2 * i + 1;
          const float x0 = v[a], x1 = v[b];
          v[a] = x0 * cs[i] - x1 * sn[i];
          v[b] = x0 * sn[i] + x1 * cs[i];
        }
        if (tempered)
          for (std::int64_t d = table.dim; d < hd; ++d) v[d] *= temperature;
      }
    }
  }, grain_rows(heads * hd));
}

// act(g) * u of 8 lanes, each lane on its own.
inline __m256 glu8(__m256 g, __m256 u, GluActivation act) {
  if (act == GluActivation::kSwigluClamped) return swiglu_clamped(g, u);
  if (act == GluActivation::kSigmoid) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_mul_ps(_mm256_div_ps(one, _mm256_add_ps(one, simd::exp(_mm256_sub_ps(_mm256_setzero_ps(), g)))), u);
  }
  return _mm256_mul_ps(act == GluActivation::kSilu ? silu(g) : gelu_tanh(g), u);
}

void glu_row(const float* g, const float* u, GluActivation act, std::int64_t n, float* o) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, glu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i), act));
  for (; i < n; ++i) {
    alignas(32) float gt[8] = {g[i]}, ut[8] = {u[i]};
    _mm256_store_ps(gt, glu8(_mm256_load_ps(gt), _mm256_load_ps(ut), act));
    o[i] = gt[0];
  }
}

void glu(ThreadPool& pool, const Tensor& gate, const Tensor& up, GluActivation act, Tensor& out) {
  const std::int64_t n = gate.numel();
  const float* g = gate.as<const float>();
  const float* u = up.as<const float>();
  float* o = out.as<float>();
  pool.parallel_for((n + 7) / 8, [&](std::int64_t begin, std::int64_t end) {
    glu_row(g + begin * 8, u + begin * 8, act, std::min(n, end * 8) - begin * 8, o + begin * 8);
  }, 2048);
}

void add(ThreadPool& pool, Tensor& x, const Tensor& y) {
  const std::int64_t n = x.numel();
  float* a = x.as<float>();
  const float* b = y.as<const float>();
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) a[i] += b[i];
  }, 8192);
}

void scale(ThreadPool& pool, Tensor& x, float s) {
  const std::int64_t n = x.numel();
  float* a = x.as<float>();
  pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) a[i] *= s;
  }, 8192);
}

void scale_logits(ThreadPool& pool, Tensor& logits, float scale, float softcap) {
  const std::int64_t cols = logits.cols();
  pool.parallel_for(logits.rows(), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      float* x = logits.as<float>() + r * cols;
      for (std::int64_t i = 0; i < cols; ++i) {
        x[i] *= scale;
        if (softcap > 0.0f) x[i] = softcap * std::tanh(x[i] / softcap);
      }
    }
  }, grain_rows(cols));
}

// Float types store through SIMD conversions; the scaled types (q8_0,
// fp8_e4m3) run the reference row encoder, which needs a whole block or row
// for its scale: a few microseconds a step, a tiny share of one. Each row is
// encoded from its own numbers, so the bytes never depend on the batch.
void write_kv(ThreadPool& pool, const Tensor& k, const Tensor& v, const Tensor& slot_mapping, PagedKv& kv) {
  const std::int64_t heads = kv.num_kv_heads(), bs = kv.block_size;
  const auto* slots = slot_mapping.as<const std::int32_t>();
  auto store = [&](const KvPool& p, std::int64_t r, const float* src) {
    switch (p.type) {
      case KvDType::kF32: return store_row(DType::F32, p.codes.data, r * p.dim, src, p.dim);
      case KvDType::kF16: return store_row(DType::F16, p.codes.data, r * p.dim, src, p.dim);
      case KvDType::kBF16: return store_row(DType::BF16, p.codes.data, r * p.dim, src, p.dim);
      default: return encode_kv_row(p.type, src, p.dim, kv_rows::codes(p, r), kv_rows::scales(p, r));
    }
  };
  pool.parallel_for(k.shape[0], [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      const std::int64_t slot = slots[t];
      if (slot < 0) continue;
      FOLIO_CHECK(slot < kv.num_blocks() * bs);
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t r = kv.row_of(slot, h);
        store(kv.k, r, k.as<const float>() + (t * heads + h) * kv.head_dim());
        store(kv.v, r, v.as<const float>() + (t * heads + h) * kv.value_head_dim());
      }
    }
  }, 16);
}

}  // namespace folio::cpu_pointwise

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
