#include "backend/cpu/dot_f32.h"

#include <immintrin.h>

namespace folio {
namespace {

void rows_dot_scalar(const float* w, int num_rows, const float* x, std::int64_t num_tokens, std::int64_t k, float* y,
                     std::int64_t y_stride) {
  for (std::int64_t t = 0; t < num_tokens; ++t)
    for (int r = 0; r < num_rows; ++r) {
      float acc = 0.0f;
      for (std::int64_t i = 0; i < k; ++i) acc += w[r * k + i] * x[t * k + i];
      y[t * y_stride + r] = acc;
    }
}

// Horizontal sums in a fixed order: halves added, then pairs.
__attribute__((target("avx2,fma"))) inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx512f,avx512dq,fma"))) inline float hsum512(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm512_extractf32x8_ps(v, 1);
  return hsum256(_mm256_add_ps(lo, hi));
}

template <int R>
__attribute__((target("avx2,fma"))) void rows_dot_avx2_n(const float* w, const float* x, std::int64_t num_tokens,
                                                         std::int64_t k, float* y, std::int64_t y_stride) {
  const std::int64_t tail = k % 8;
  alignas(32) std::int32_t mask_bits[8];
  for (int i = 0; i < 8; ++i) mask_bits[i] = i < tail ? -1 : 0;
  const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask_bits));
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * k;
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    std::int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
      __m256 xv = _mm256_loadu_ps(xt + i);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * k + i), xv, acc[r]);
    }
    if (tail) {
      __m256 xv = _mm256_maskload_ps(xt + i, mask);
      for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_maskload_ps(w + r * k + i, mask), xv, acc[r]);
    }
    for (int r = 0; r < R; ++r) y[t * y_stride + r] = hsum256(acc[r]);
  }
}

template <int R>
__attribute__((target("avx512f,avx512dq,fma"))) void rows_dot_avx512_n(const float* w, const float* x, std::int64_t num_tokens,
                                                              std::int64_t k, float* y, std::int64_t y_stride) {
  const std::int64_t tail = k % 16;
  const __mmask16 mask = static_cast<__mmask16>((1u << tail) - 1);
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * k;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    std::int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      __m512 xv = _mm512_loadu_ps(xt + i);
      for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + r * k + i), xv, acc[r]);
    }
    if (tail) {
      __m512 xv = _mm512_maskz_loadu_ps(mask, xt + i);
      for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, w + r * k + i), xv, acc[r]);
    }
    for (int r = 0; r < R; ++r) y[t * y_stride + r] = hsum512(acc[r]);
  }
}


#define FOLIO_ROWS_DOT_DISPATCH(name, impl)                                                                   \
  void name(const float* w, int num_rows, const float* x, std::int64_t num_tokens, std::int64_t k, float* y, \
            std::int64_t y_stride) {                                                                          \
    switch (num_rows) {                                                                                       \
      case 1: return impl<1>(w, x, num_tokens, k, y, y_stride);                                               \
      case 2: return impl<2>(w, x, num_tokens, k, y, y_stride);                                               \
      case 3: return impl<3>(w, x, num_tokens, k, y, y_stride);                                               \
      case 4: return impl<4>(w, x, num_tokens, k, y, y_stride);                                               \
      case 5: return impl<5>(w, x, num_tokens, k, y, y_stride);                                               \
      case 6: return impl<6>(w, x, num_tokens, k, y, y_stride);                                               \
      case 7: return impl<7>(w, x, num_tokens, k, y, y_stride);                                               \
      case 8: return impl<8>(w, x, num_tokens, k, y, y_stride);                                               \
    }                                                                                                         \
  }

FOLIO_ROWS_DOT_DISPATCH(rows_dot_avx2, rows_dot_avx2_n)
FOLIO_ROWS_DOT_DISPATCH(rows_dot_avx512, rows_dot_avx512_n)

}  // namespace

RowsDotF32 select_rows_dot_f32(const CpuFeatures& f) {
  if (f.avx512) return rows_dot_avx512;
  if (f.avx2) return rows_dot_avx2;
  return rows_dot_scalar;
}

}  // namespace folio
