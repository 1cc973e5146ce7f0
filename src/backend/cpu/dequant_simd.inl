// Block decoders to f32 for the kF32 path and for embedding rows. Each does the
// float operations of tensor/dequantize.cc in the same order (mul, then add or
// sub, never fused), so the weights it produces are bit-identical to the
// reference's; the kF32 kernel then differs from the reference only in the
// order of its sums.
//
// A decoder D has kElems elements in kBytes bytes per block and
// decode(block, out). Float types (kFloat) decode 256-element chunks and a
// row may end in a partial chunk: decode_tail fills `count` elements and pads
// with zeros to a multiple of 8. F32 weights are read in place (kInPlace).

struct DeqF32 {
  static constexpr int kElems = 256;
  static constexpr int kBytes = 1024;
  static constexpr bool kFloat = true;
  static constexpr bool kInPlace = true;
  static FOLIO_INLINE void decode(const std::byte* b, float* out) { std::memcpy(out, b, kBytes); }
  static FOLIO_INLINE void decode_tail(const std::byte* b, float* out, int count) {
    std::memcpy(out, b, static_cast<std::size_t>(count) * sizeof(float));
    for (int i = count; i % 8 != 0; ++i) out[i] = 0.0f;
  }
};

struct DeqF16 {
  static constexpr int kElems = 256;
  static constexpr int kBytes = 512;
  static constexpr bool kFloat = true;
  static constexpr bool kInPlace = false;
  static FOLIO_INLINE void decode(const std::byte* b, float* out) {
    for (int i = 0; i < kElems; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(loadu128(b + 2 * i)));
  }
  static FOLIO_INLINE void decode_tail(const std::byte* b, float* out, int count) {
    int i = 0;
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(loadu128(b + 2 * i)));
    for (; i < count; ++i) out[i] = load_f16(b + 2 * i);
    for (; i % 8 != 0; ++i) out[i] = 0.0f;
  }
};

struct DeqBF16 {
  static constexpr int kElems = 256;
  static constexpr int kBytes = 512;
  static constexpr bool kFloat = true;
  static constexpr bool kInPlace = false;
  static FOLIO_INLINE __m256 widen(const std::byte* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(loadu128(p)), 16));
  }
  static FOLIO_INLINE void decode(const std::byte* b, float* out) {
    for (int i = 0; i < kElems; i += 8) _mm256_storeu_ps(out + i, widen(b + 2 * i));
  }
  static FOLIO_INLINE void decode_tail(const std::byte* b, float* out, int count) {
    int i = 0;
    for (; i + 8 <= count; i += 8) _mm256_storeu_ps(out + i, widen(b + 2 * i));
    for (; i < count; ++i) {
      std::uint16_t h;
      std::memcpy(&h, b + 2 * i, sizeof(h));
      const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
      std::memcpy(out + i, &bits, sizeof(bits));
    }
    for (; i % 8 != 0; ++i) out[i] = 0.0f;
  }
};

// Q4_0, Q4_1, Q5_0, Q5_1: d * float(q - offset), or d * float(q) + m.
template <class F>
struct DeqBlock32 {
  static constexpr int kElems = 32;
  static constexpr int kBytes = F::kBytes;
  static constexpr bool kFloat = false;
  static constexpr bool kInPlace = false;
  static FOLIO_INLINE void decode(const std::byte* b, float* out) {
    const __m256i codes = F::codes(b);
    const __m256 d = _mm256_set1_ps(load_f16(b));
    for (int p = 0; p < 4; ++p) {
      __m256i q = widen_u8(codes, p);
      if constexpr (F::kOffset != 0) q = _mm256_sub_epi32(q, _mm256_set1_epi32(F::kOffset));
      __m256 v = _mm256_mul_ps(d, _mm256_cvtepi32_ps(q));
      if constexpr (F::kMin) v = _mm256_add_ps(v, _mm256_set1_ps(load_f16(b + 2)));
      _mm256_storeu_ps(out + 8 * p, v);
    }
  }
};

struct DeqQ8_0 {
  static constexpr int kElems = 32;
  static constexpr int kBytes = 34;
  static constexpr bool kFloat = false;
  static constexpr bool kInPlace = false;
  static FOLIO_INLINE void decode(const std::byte* b, float* out) {
    const __m256 d = _mm256_set1_ps(load_f16(b));
    const __m256i q = loadu256(b + 2);
    for (int p = 0; p < 4; ++p) _mm256_storeu_ps(out + 8 * p, _mm256_mul_ps(d, _mm256_cvtepi32_ps(widen_s8(q, p))));
  }
};

// IQ4_NL, MXFP4: d * float(value(q)).
template <class F>
struct DeqGrid32 {
  static constexpr int kElems = 32;
  static constexpr int kBytes = F::kBytes;
  static constexpr bool kFloat = false;
  static constexpr bool kInPlace = false;
  static FOLIO_INLINE void decode(const std::byte* b, float* out) {
    const __m256i v = F::values(b);
    const __m256 d = _mm256_set1_ps(F::scale(b));
    for (int p = 0; p < 4; ++p) _mm256_storeu_ps(out + 8 * p, _mm256_mul_ps(d, _mm256_cvtepi32_ps(widen_s8(v, p))));
  }
};

// IQ4_XS: scale = d * float(l - 32) per group first, then scale * float(value(q)).
struct DeqIQ4XS {
  static constexpr int kElems = 256;
  static constexpr int kBytes = 136;
  static constexpr bool kFloat = false;
  static constexpr bool kInPlace = false;
  static FOLIO_INLINE void decode(const std::byte* b, float* out) {
    float scale[8];
    IQ4_XS::scales(b, scale);
    const __m256i table = grid_table(kIq4Values, false);
    for (int g = 0; g < 8; ++g) {
      const __m256i v = _mm256_shuffle_epi8(table, split_nibbles(b + 8 + 16 * g));
      const __m256 d = _mm256_set1_ps(scale[g]);
      for (int p = 0; p < 4; ++p)
        _mm256_storeu_ps(out + 32 * g + 8 * p, _mm256_mul_ps(d, _mm256_cvtepi32_ps(widen_s8(v, p))));
    }
  }
};

// NVFP4: d of each group of 16 * float(value(q)).
struct DeqNVFP4 {
  static constexpr int kElems = 64;
  static constexpr int kBytes = 36;
  static constexpr bool kFloat = false;
  static constexpr bool kInPlace = false;
  static FOLIO_INLINE void decode(const std::byte* b, float* out) {
    alignas(32) float scale[8];
    _mm256_store_ps(scale, ue4m3_half_lanes(_mm256_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(load_u32(b))))));
    for (int half = 0; half < 2; ++half) {
      const __m256i v = NVFP4::values(b, half);
      for (int p = 0; p < 4; ++p) {
        const __m256 d = _mm256_set1_ps(scale[2 * half + p / 2]);
        _mm256_storeu_ps(out + 32 * half + 8 * p, _mm256_mul_ps(d, _mm256_cvtepi32_ps(widen_s8(v, p))));
      }
    }
  }
};

// K-quants: scale = d * sc[g] (and min = dmin * mn[g]) first, then
// scale * float(q - offset), or scale * float(q) - min.
template <class F>
struct DeqK {
  static constexpr int kElems = 256;
  static constexpr int kBytes = F::kBytes;
  static constexpr bool kFloat = false;
  static constexpr bool kInPlace = false;
  static FOLIO_INLINE void decode(const std::byte* b, float* out) {
    KUnpacked u;
    F::unpack(b, u);
    alignas(32) float scale[16], min[16];
    const __m256 d = _mm256_set1_ps(u.d), dmin = _mm256_set1_ps(u.dmin);
    for (int h = 0; h < 2; ++h) {
      const __m128i sc = h == 0 ? _mm256_castsi256_si128(u.sc) : _mm256_extracti128_si256(u.sc, 1);
      _mm256_store_ps(scale + 8 * h, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(sc))));
      if constexpr (F::kMin) {
        const __m128i mn = h == 0 ? _mm256_castsi256_si128(u.corr) : _mm256_extracti128_si256(u.corr, 1);
        _mm256_store_ps(min + 8 * h, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(mn))));
      }
    }
    for (int j = 0; j < 8; ++j)
      for (int p = 0; p < 4; ++p) {
        const int g = 2 * j + p / 2;
        __m256i q = widen_u8(u.q[j], p);
        if constexpr (F::kOffset != 0) q = _mm256_sub_epi32(q, _mm256_set1_epi32(F::kOffset));
        __m256 v = _mm256_mul_ps(_mm256_set1_ps(scale[g]), _mm256_cvtepi32_ps(q));
        if constexpr (F::kMin) v = _mm256_sub_ps(v, _mm256_set1_ps(min[g]));
        _mm256_storeu_ps(out + 32 * j + 8 * p, v);
      }
  }
};

// A whole row (n a multiple of D::kElems, or any n for float types).
template <class D>
void dequantize_row_simd(const void* src, float* dst, std::int64_t n) {
  const auto* b = static_cast<const std::byte*>(src);
  const std::int64_t num_blocks = n / D::kElems;
  for (std::int64_t i = 0; i < num_blocks; ++i) D::decode(b + i * D::kBytes, dst + i * D::kElems);
  if constexpr (D::kFloat) {
    const int rest = static_cast<int>(n - num_blocks * D::kElems);
    if (rest > 0) {
      alignas(32) float tail[D::kElems];
      D::decode_tail(b + num_blocks * D::kBytes, tail, rest);
      std::memcpy(dst + num_blocks * D::kElems, tail, static_cast<std::size_t>(rest) * sizeof(float));
    }
  }
}

// acc[r][t] += w_r[v] * x_t[v] for each 8-float vector v < num_vectors, in order.
template <int R, int T>
FOLIO_INLINE void fma_vectors(const float* const (&w)[R], const TileArgs& a, std::int64_t x_offset, int num_vectors,
                              __m256 (&acc)[R][T]) {
  for (int v = 0; v < num_vectors; ++v) {
    __m256 xv[T];
    for (int t = 0; t < T; ++t)
      xv[t] = _mm256_loadu_ps(reinterpret_cast<const float*>(a.x + t * a.x_stride) + x_offset + 8 * v);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = _mm256_loadu_ps(w[r] + 8 * v);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
}

// The kF32 tile: blocks decoded into a small buffer (one block per row, in
// L1), then one FMA chain per output over 8-float vectors in element order,
// then y = hsum(acc) (+ bias).
template <class D, int R, int T>
void tile_f32(const TileArgs& a) {
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  alignas(32) float buf[R][D::kElems];
  const float* w[R];
  const std::int64_t num_blocks = a.k / D::kElems;
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    if (a.prefetch != nullptr) prefetch_bytes(a.prefetch + b * R * D::kBytes, R * D::kBytes);
    for (int r = 0; r < R; ++r) {
      const std::byte* block = a.w + r * a.w_stride + b * D::kBytes;
      if constexpr (D::kInPlace) {
        w[r] = reinterpret_cast<const float*>(block);
      } else {
        D::decode(block, buf[r]);
        w[r] = buf[r];
      }
    }
    fma_vectors<R, T>(w, a, b * D::kElems, D::kElems / 8, acc);
  }
  if constexpr (D::kFloat) {
    const int rest = static_cast<int>(a.k - num_blocks * D::kElems);
    if (rest > 0) {
      for (int r = 0; r < R; ++r) {
        D::decode_tail(a.w + r * a.w_stride + num_blocks * D::kBytes, buf[r], rest);
        w[r] = buf[r];
      }
      const std::int64_t x0 = num_blocks * D::kElems;
      fma_vectors<R, T>(w, a, x0, rest / 8, acc);
      if (rest % 8 != 0) {
        // The last partial vector: x masked to zeros past the row, w padded with zeros.
        alignas(32) std::int32_t mask_bits[8];
        for (int i = 0; i < 8; ++i) mask_bits[i] = i < rest % 8 ? -1 : 0;
        const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask_bits));
        const std::int64_t x_last = x0 + rest / 8 * 8;
        for (int t = 0; t < T; ++t) {
          const __m256 xv = _mm256_maskload_ps(reinterpret_cast<const float*>(a.x + t * a.x_stride) + x_last, mask);
          for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(_mm256_load_ps(buf[r] + rest / 8 * 8), xv, acc[r][t]);
        }
      }
    }
  }
  store_tile(a, acc);
}
