// 256-bit building blocks of the matmul kernels. Included inside a target
// region by matmul_avx2.cc, matmul_avx512.cc and matmul_avx512_vnni.cc, in an
// anonymous namespace; FOLIO_MATMUL_VNNI picks the integer dot instructions.
// The integer dots give identical int32 lanes at every level: maddubs only
// ever sees codes <= 128 against |x| <= 127, so its int16 pairs never
// saturate, and Q8_0's codes up to 255 go to dpbusd, which does not saturate.

#define FOLIO_INLINE inline __attribute__((always_inline))

// The sum of 8 lanes in a fixed order: halves added, then pairs.
FOLIO_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A tile's outputs: y[t, r] = hsum(acc[r][t]) (+ bias[r]).
template <int R, int T>
FOLIO_INLINE void store_tile(const TileArgs& a, const __m256 (&acc)[R][T]) {
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) {
      float v = hsum(acc[r][t]);
      if (a.bias != nullptr) v += a.bias[r];
      a.y[t * a.y_stride + r] = v;
    }
}

FOLIO_INLINE std::int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

FOLIO_INLINE float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

FOLIO_INLINE __m256i loadu256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
FOLIO_INLINE __m128i loadu128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// A binary16 field of a block (any alignment) as float; exact.
FOLIO_INLINE float load_f16(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

FOLIO_INLINE std::uint32_t load_u32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// 32 bytes: the low nibbles of 16 bytes, then their high nibbles (the element
// order of Q4_0 .. Q5_1 blocks, and of a pair of Q4_K chunks when split).
FOLIO_INLINE __m256i split_nibbles(const std::byte* p) {
  const __m256i both = _mm256_broadcastsi128_si256(loadu128(p));
  return _mm256_and_si256(_mm256_srlv_epi64(both, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
}

// Byte j is 0xff where bit j of `bits` is set, else 0.
FOLIO_INLINE __m256i bits_to_bytes(std::uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                                              2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
}

// Byte j is `value` where bit `bit` of byte j of v is set, else 0.
FOLIO_INLINE __m256i select_bit(__m256i v, int bit, char value) {
  const __m256i m = _mm256_set1_epi8(static_cast<char>(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, m), m), _mm256_set1_epi8(value));
}

// acc + the 8 int32 lanes of u (unsigned codes) times s (signed), lane i
// summing bytes 4i .. 4i+3.
FOLIO_INLINE __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if FOLIO_MATMUL_VNNI
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// As dot_u8s8, each pair of products first weighted by the int16 lane of
// `scales` that holds it (lanes 0-7: bytes 0-15, lanes 8-15: bytes 16-31).
FOLIO_INLINE __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i scales) {
  const __m256i pairs = _mm256_maddubs_epi16(u, s);
#if FOLIO_MATMUL_VNNI
  return _mm256_dpwssd_epi32(acc, pairs, scales);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
#endif
}

// The 8 lanes of -offset * (sum of 4 bytes of s): added to a dot of codes,
// it turns sum(q * s) into sum((q - offset) * s). offset <= 128.
FOLIO_INLINE __m256i neg_offset_lanes(__m256i s, int offset) {
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(offset)), s);
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(-1));
}

// 8 bytes starting at byte 8 * part of v, widened to int32.
FOLIO_INLINE __m256i widen_u8(__m256i v, int part) {
  const __m128i half = part < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
  return _mm256_cvtepu8_epi32((part & 1) ? _mm_srli_si128(half, 8) : half);
}

FOLIO_INLINE __m256i widen_s8(__m256i v, int part) {
  const __m128i half = part < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
  return _mm256_cvtepi8_epi32((part & 1) ? _mm_srli_si128(half, 8) : half);
}

// Prefetches [p, p + bytes) into L2 (into L1, bursts of prefetches stall on
// its few miss buffers).
FOLIO_INLINE void prefetch_bytes(const std::byte* p, int bytes) {
  for (int i = 0; i < bytes; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T1);
}
