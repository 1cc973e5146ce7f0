// The K-quant formats (Q2_K .. Q6_K) against kQ8x256 activations, or packed
// (packed_weights.h) against kQ8x256Packed ones. Each format unpacks a
// super-block of 256 to unsigned codes, 8 vectors of 32, plus a scale (and for
// Q2_K/Q4_K/Q5_K a min) per group of 16:
//   w = d * sc[g] * (q - kOffset)          or   w = d * sc[g] * q - dmin * mn[g]
// (Q4_K/Q5_K's groups of 32 appear as two equal groups of 16). In the file's
// layout vector j is chunk j (elements 32 j ..); packed, vector i holds
// elements 4 i .. 4 i + 3 of every chunk, chunk j in int32 lane j.
//
// Per super-block and output, in this order (the same in every tile shape and
// in both layouts), lane j standing for chunk j (groups 2 j and 2 j + 1).
// Scales per 32 (Q4_K, Q5_K: kScalePer32), where one scale covers a chunk:
//   dot  = [sum over chunk j of q * xq]_j                          exact int32
//   acc  = fma(float(dot), [d * sc[j]]_j * d_x, acc)        (d * sc[j] is exact)
//   acc  = fnmadd([dmin * mn[j]]_j, [d_x * float(sum over chunk j of xq)]_j, acc)
// Scales per 16 (Q2_K, Q3_K, Q6_K):
//   isum = [sum over chunk j of sc[g] * q * xq]_j                  exact int32
//   corr = [sum over chunk j's groups of c[g] * bsum[g]]_j         exact int32
//          with c = kOffset * sc (folded: isum -= corr) or c = mn
//   acc  = fma(float(isum), d * d_x, acc)
//   acc  = fnmadd(float(corr), dmin * d_x, acc)                 (types with a min)
// then y = hsum(acc) (+ bias). In the file's layout dot and isum come from a
// horizontal-add tree over the 8 chunks' dots; packed, from each group's dots
// accumulated in place (then one multiply by its scale for isum). Integer sums
// are exact and kQ8x256Packed's d_x * sum floats are the same single product,
// so both layouts give the same bits. Scales per 32 keep the scales out of the
// integer work: per output and super-block the packed tile then spends 8
// dpbusd and 3 multiplies, where the per-16 types need 5.

struct KUnpacked {
  __m256i q[8];  // codes of each chunk of 32 elements
  __m256i sc;    // int16 scale of each group of 16 (Q4_K/Q5_K: each scale of 32 twice)
  __m256i corr;  // int16 of each group of 16: its min (types with a min), or kOffset * its scale
  float d;
  float dmin;
};

FOLIO_INLINE std::uint64_t load_u64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Chunk j = 4h + k of the 2-bit layout Q2_K and Q3_K share: bits 2k of the
// 32 bytes qs[32h ..].
FOLIO_INLINE __m256i crumbs(const std::byte* qs, int j) {
  return _mm256_and_si256(_mm256_srli_epi16(loadu256(qs + 32 * (j / 4)), 2 * (j % 4)), _mm256_set1_epi8(3));
}

// Chunks 2c and 2c + 1 of the nibble layout Q4_K and Q5_K share: the low and
// high nibbles of the 32 bytes qs[32c ..].
FOLIO_INLINE void nibble_chunks(const std::byte* qs, __m256i (&q)[8]) {
  for (int c = 0; c < 4; ++c) {
    const __m256i v = loadu256(qs + 32 * c);
    q[2 * c] = _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
    q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f));
  }
}

// v shifted left by N bits in each 16-bit lane (right by -N for N < 0).
template <int N>
FOLIO_INLINE __m256i shift_epi16(__m256i v) {
  if constexpr (N > 0) return _mm256_slli_epi16(v, N);
  if constexpr (N < 0) return _mm256_srli_epi16(v, -N);
  return v;
}

// Packed 2-bit fields (packed_weights.h): vector 4 s + u is bits 2u, 2u + 1 of
// the 32 bytes at p + 32 s, placed at bit kBit of each code and ORed into q.
// 16-bit shifts are safe: what crosses a byte lands outside the mask.
template <int kBit, int... U>
FOLIO_INLINE void packed_crumbs_half(__m256i h, __m256i* q, std::integer_sequence<int, U...>) {
  const __m256i mask = _mm256_set1_epi8(static_cast<char>(3 << kBit));
  ((q[U] = _mm256_or_si256(q[U], _mm256_and_si256(shift_epi16<kBit - 2 * U>(h), mask))), ...);
}

template <int kBit>
FOLIO_INLINE void packed_crumbs(const std::byte* p, __m256i (&q)[8]) {
  packed_crumbs_half<kBit>(loadu256(p), q, std::make_integer_sequence<int, 4>{});
  packed_crumbs_half<kBit>(loadu256(p + 32), q + 4, std::make_integer_sequence<int, 4>{});
}

// Packed 1-bit fields: bit i of the 32 bytes at p, placed at bit kBit of the
// codes of vector i and ORed into q.
template <int kBit, int... I>
FOLIO_INLINE void packed_bits(const std::byte* p, __m256i (&q)[8], std::integer_sequence<int, I...>) {
  const __m256i h = loadu256(p), mask = _mm256_set1_epi8(static_cast<char>(1 << kBit));
  ((q[I] = _mm256_or_si256(q[I], _mm256_and_si256(shift_epi16<kBit - I>(h), mask))), ...);
}

template <int kBit>
FOLIO_INLINE void packed_bits(const std::byte* p, __m256i (&q)[8]) {
  packed_bits<kBit>(p, q, std::make_integer_sequence<int, 8>{});
}

FOLIO_INLINE void zero_codes(__m256i (&q)[8]) {
  for (int i = 0; i < 8; ++i) q[i] = _mm256_setzero_si256();
}

// Q4_K and Q5_K's twelve bytes of 6-bit scales and mins, as 8-bit fields: for
// group g < 4 the low six bits of bytes g and g + 4; for g >= 4 a nibble of
// byte g + 4 below the top two bits of bytes g - 4 and g. Each field twice, as
// two groups of 16.
FOLIO_INLINE void k4_scales(const std::byte* s, KUnpacked& u) {
  const std::uint32_t s0 = load_u32(s), s1 = load_u32(s + 4), s2 = load_u32(s + 8);
  const std::uint32_t sc_low = s0 & 0x3f3f3f3fu;
  const std::uint32_t sc_high = (s2 & 0x0f0f0f0fu) | ((s0 >> 2) & 0x30303030u);
  const std::uint32_t mn_low = s1 & 0x3f3f3f3fu;
  const std::uint32_t mn_high = ((s2 >> 4) & 0x0f0f0f0fu) | ((s1 >> 2) & 0x30303030u);
  const __m128i fields = _mm_setr_epi32(static_cast<int>(sc_low), static_cast<int>(sc_high), static_cast<int>(mn_low),
                                        static_cast<int>(mn_high));
  u.sc = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(fields, fields));
  u.corr = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(fields, fields));
}

struct Q2_K {
  static constexpr int kBytes = 84;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr bool kScalePer32 = false;
  static FOLIO_INLINE void scales(const std::byte* b, KUnpacked& u) {
    const __m128i packed = loadu128(b);  // scale in the low nibble, min in the high one
    u.sc = _mm256_cvtepu8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0x0f)));
    u.corr = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0f)));
    u.d = load_f16(b + 80);
    u.dmin = load_f16(b + 82);
  }
  static FOLIO_INLINE void unpack(const std::byte* b, KUnpacked& u) {
    scales(b, u);
    for (int j = 0; j < 8; ++j) u.q[j] = crumbs(b + 16, j);
  }
  static FOLIO_INLINE void unpack_packed(const std::byte* b, KUnpacked& u) {
    scales(b, u);
    zero_codes(u.q);
    packed_crumbs<0>(b + 16, u.q);
  }
};

struct Q3_K {
  static constexpr int kBytes = 110;
  static constexpr int kOffset = 4;
  static constexpr bool kMin = false;
  static constexpr bool kScalePer32 = false;
  static FOLIO_INLINE void scales(const std::byte* b, KUnpacked& u) {
    // Scale of group g: low nibble from byte g % 8 (>> 4 for g >= 8), top two
    // bits from byte 8 + g % 4 at bit 2 * (g / 4); stored offset by 32.
    const std::uint64_t low = load_u64(b + 96);
    const std::uint64_t top = load_u32(b + 104);
    const std::uint64_t m2 = 0x03030303u, m4 = 0x0f0f0f0f0f0f0f0full;
    const std::uint64_t first = (low & m4) | (((top & m2) | (((top >> 2) & m2) << 32)) << 4);
    const std::uint64_t second = ((low >> 4) & m4) | ((((top >> 4) & m2) | (((top >> 6) & m2) << 32)) << 4);
    const __m128i fields = _mm_sub_epi8(_mm_set_epi64x(static_cast<long long>(second), static_cast<long long>(first)),
                                        _mm_set1_epi8(32));
    u.sc = _mm256_cvtepi8_epi16(fields);
    u.corr = _mm256_slli_epi16(u.sc, 2);  // kOffset * sc
    u.d = load_f16(b + 108);
    u.dmin = 0.0f;
  }
  // q = crumb - 4 unless the element's bit of hmask is set: code = crumb + 4 * bit.
  static FOLIO_INLINE void unpack(const std::byte* b, KUnpacked& u) {
    scales(b, u);
    const __m256i hmask = loadu256(b);
    for (int j = 0; j < 8; ++j) u.q[j] = _mm256_or_si256(crumbs(b + 32, j), select_bit(hmask, j, 4));
  }
  static FOLIO_INLINE void unpack_packed(const std::byte* b, KUnpacked& u) {
    scales(b, u);
    zero_codes(u.q);
    packed_crumbs<0>(b + 32, u.q);
    packed_bits<2>(b, u.q);
  }
};

struct Q4_K {
  static constexpr int kBytes = 144;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr bool kScalePer32 = true;
  static FOLIO_INLINE void unpack(const std::byte* b, KUnpacked& u) {
    k4_scales(b + 4, u);
    nibble_chunks(b + 16, u.q);
    u.d = load_f16(b);
    u.dmin = load_f16(b + 2);
  }
  static FOLIO_INLINE void unpack_packed(const std::byte* b, KUnpacked& u) {
    k4_scales(b + 4, u);
    packed_nibbles(b + 16, u.q);
    u.d = load_f16(b);
    u.dmin = load_f16(b + 2);
  }
};

struct Q5_K {
  static constexpr int kBytes = 176;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static constexpr bool kScalePer32 = true;
  static FOLIO_INLINE void unpack(const std::byte* b, KUnpacked& u) {
    k4_scales(b + 4, u);
    nibble_chunks(b + 48, u.q);
    const __m256i qh = loadu256(b + 16);  // bit j of byte l: bit 4 of element 32j + l
    for (int j = 0; j < 8; ++j) u.q[j] = _mm256_or_si256(u.q[j], select_bit(qh, j, 0x10));
    u.d = load_f16(b);
    u.dmin = load_f16(b + 2);
  }
  static FOLIO_INLINE void unpack_packed(const std::byte* b, KUnpacked& u) {
    k4_scales(b + 4, u);
    packed_nibbles(b + 48, u.q);
    packed_bits<4>(b + 16, u.q);
    u.d = load_f16(b);
    u.dmin = load_f16(b + 2);
  }
};

struct Q6_K {
  static constexpr int kBytes = 210;
  static constexpr int kOffset = 32;
  static constexpr bool kMin = false;
  static constexpr bool kScalePer32 = false;
  static FOLIO_INLINE void unpack(const std::byte* b, KUnpacked& u) {
    u.sc = _mm256_cvtepi8_epi16(loadu128(b + 192));
    u.corr = _mm256_slli_epi16(u.sc, 5);  // kOffset * sc
    // Chunk 4h + i: low nibble from ql[64h + 32(i % 2) ..] >> 4(i / 2), top
    // two bits from qh[32h ..] >> 2i.
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = loadu256(b + 64 * h), ql1 = loadu256(b + 64 * h + 32);
      const __m256i qh = loadu256(b + 128 + 32 * h);
      const __m256i low4 = _mm256_set1_epi8(0x0f), top2 = _mm256_set1_epi8(0x30);
      u.q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top2));
      u.q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top2));
      u.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, top2));
      u.q[4 * h + 3] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), top2));
    }
    u.d = load_f16(b + 208);
    u.dmin = 0.0f;
  }
  static FOLIO_INLINE void unpack_packed(const std::byte* b, KUnpacked& u) {
    u.sc = _mm256_cvtepi8_epi16(loadu128(b + 192));
    u.corr = _mm256_slli_epi16(u.sc, 5);
    packed_nibbles(b, u.q);
    packed_crumbs<4>(b + 128, u.q);
    u.d = load_f16(b + 208);
    u.dmin = 0.0f;
  }
};

// One row's super-block, ready for the dots of every token.
struct KRow {
  __m256i q[8];      // codes: chunk j (file layout) or vector i (packed)
  __m256i scale[8];  // per-16 types, file layout: int16 lanes 0-7 the scale of chunk j's first group, 8-15 of its second
  __m256i sc_lo;     // per-16 types, packed: int32 lane j the scale of group 2 j
  __m256i sc_hi;     //   and of group 2 j + 1
  __m256i corr;      // per-16 types: int16 c[g] of each group (KUnpacked::corr)
  __m256 d;          // per-16 types: d (and dmin) in every lane
  __m256 dmin;
  __m256 dsc;        // per-32 types: lane j d * sc[j]
  __m256 dmn;        //   and dmin * mn[j]
};

// Lane j: int16 lane 2 j (lo) or 2 j + 1 (hi) of v, sign-extended.
FOLIO_INLINE __m256i even_int16(__m256i v) { return _mm256_srai_epi32(_mm256_slli_epi32(v, 16), 16); }
FOLIO_INLINE __m256i odd_int16(__m256i v) { return _mm256_srai_epi32(v, 16); }

template <class F>
FOLIO_INLINE void finish_row(const KUnpacked& u, KRow& out) {
  if constexpr (F::kScalePer32) {
    out.dsc = _mm256_mul_ps(_mm256_set1_ps(u.d), _mm256_cvtepi32_ps(even_int16(u.sc)));
    out.dmn = _mm256_mul_ps(_mm256_set1_ps(u.dmin), _mm256_cvtepi32_ps(even_int16(u.corr)));
  } else {
    out.corr = u.corr;
    out.d = _mm256_set1_ps(u.d);
    out.dmin = _mm256_set1_ps(u.dmin);
  }
}

template <class F>
FOLIO_INLINE void decode_k(const std::byte* b, KRow& out) {
  KUnpacked u;
  F::unpack(b, u);
  for (int j = 0; j < 8; ++j) out.q[j] = u.q[j];
  if constexpr (!F::kScalePer32) {
    // Chunk j's scales are int16 lanes 2j and 2j + 1 of u.sc: both 128-bit
    // halves get one half of u.sc, then a byte shuffle spreads the pair.
    const __m256i first = _mm256_permute4x64_epi64(u.sc, 0x44), second = _mm256_permute4x64_epi64(u.sc, 0xee);
    for (int j = 0; j < 4; ++j) {
      const auto pick = [](int lane) { return static_cast<short>((2 * lane) | ((2 * lane + 1) << 8)); };
      const __m256i spread = _mm256_setr_m128i(_mm_set1_epi16(pick(2 * j)), _mm_set1_epi16(pick(2 * j + 1)));
      out.scale[j] = _mm256_shuffle_epi8(first, spread);
      out.scale[j + 4] = _mm256_shuffle_epi8(second, spread);
    }
  }
  finish_row<F>(u, out);
}

template <class F>
FOLIO_INLINE void decode_k_packed(const std::byte* b, KRow& out) {
  KUnpacked u;
  F::unpack_packed(b, u);
  for (int i = 0; i < 8; ++i) out.q[i] = u.q[i];
  if constexpr (!F::kScalePer32) {
    out.sc_lo = even_int16(u.sc);
    out.sc_hi = odd_int16(u.sc);
  }
  finish_row<F>(u, out);
}

// The float work of one row, token and super-block: `ints` is dot (scales per
// 32) or isum (per 16); the token's d_x, its group sums and (per 32) its
// chunks' d_x * sums.
template <class F>
FOLIO_INLINE __m256 accumulate_k(const KRow& w, __m256i ints, __m256 dx, __m256i bsums, __m256 dsums, __m256 acc) {
  if constexpr (F::kScalePer32) {
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints), _mm256_mul_ps(w.dsc, dx), acc);
    return _mm256_fnmadd_ps(w.dmn, dsums, acc);
  } else {
    const __m256i corr = _mm256_madd_epi16(bsums, w.corr);
    if constexpr (F::kMin) {
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ints), _mm256_mul_ps(w.d, dx), acc);
      return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_mul_ps(w.dmin, dx), acc);
    } else {
      return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(ints, corr)), _mm256_mul_ps(w.d, dx), acc);
    }
  }
}

template <class F, int R, int T>
void tile_q8_k(const TileArgs& a) {
  const std::int64_t num_blocks = a.k / 256;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  KRow w[R];
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    if (a.prefetch != nullptr) prefetch_bytes(a.prefetch + b * R * F::kBytes, R * F::kBytes);
    for (int r = 0; r < R; ++r) decode_k<F>(a.w + r * a.w_stride + b * F::kBytes, w[r]);
    for (int t = 0; t < T; ++t) {
      const std::byte* xr = a.x + t * a.x_stride;
      const std::byte* xq = xr + b * 256;
      const __m256i bsums = loadu256(xr + a.x_sums_offset + b * 32);
      const __m256 dx = _mm256_broadcast_ss(reinterpret_cast<const float*>(xr + a.x_d_offset) + b);
      // The chunks' d_x * sums, as kQ8x256Packed stores them.
      __m256 dsums = _mm256_setzero_ps();
      if constexpr (F::kScalePer32)
        dsums = _mm256_mul_ps(dx, _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, _mm256_set1_epi16(1))));
      __m256i ints[R];
      {
        __m256i l[R][8];
        for (int j = 0; j < 8; ++j) {
          const __m256i xv = loadu256(xq + 32 * j);
          for (int r = 0; r < R; ++r) {
            if constexpr (F::kScalePer32) {
              l[r][j] = dot_u8s8(_mm256_setzero_si256(), w[r].q[j], xv);
            } else {
              l[r][j] = dot_u8s8_scaled(_mm256_setzero_si256(), w[r].q[j], xv, w[r].scale[j]);
            }
          }
        }
        for (int r = 0; r < R; ++r) ints[r] = sum_lanes_8(l[r]);
      }
      for (int r = 0; r < R; ++r) acc[r][t] = accumulate_k<F>(w[r], ints[r], dx, bsums, dsums, acc[r][t]);
    }
  }
  store_tile(a, acc);
}

template <class F, int R, int T>
void tile_q8_k_packed(const TileArgs& a) {
  const std::int64_t num_blocks = a.k / 256;
  // Locals, so that the loops below keep them in registers.
  const std::byte* const w0 = a.w;
  const std::byte* const x0 = a.x;
  const std::size_t w_stride = a.w_stride, x_stride = a.x_stride;
  const std::size_t d_offset = a.x_d_offset, sums_offset = a.x_sums_offset, dsums_offset = a.x_dsums_offset;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  KRow w[R];
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    if (a.prefetch != nullptr) prefetch_bytes(a.prefetch + b * R * F::kBytes, R * F::kBytes);
    for (int r = 0; r < R; ++r) decode_k_packed<F>(w0 + r * w_stride + b * F::kBytes, w[r]);
    const std::byte* xr = x0;
    for (int t = 0; t < T; ++t, xr += x_stride) {
      const std::byte* xq = xr + b * 256;
      const __m256 dx = _mm256_broadcast_ss(reinterpret_cast<const float*>(xr + d_offset) + b);
      __m256i bsums = _mm256_setzero_si256();
      __m256 dsums = _mm256_setzero_ps();
      if constexpr (F::kScalePer32) {
        dsums = _mm256_loadu_ps(reinterpret_cast<const float*>(xr + dsums_offset) + 8 * b);
      } else {
        bsums = loadu256(xr + sums_offset + b * 32);
      }
      for (int r = 0; r < R; ++r) {
        __m256i ints;
        if constexpr (F::kScalePer32) {
          // One scale per chunk: all 8 vectors in one chain, each lane a chunk's dot.
          __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
          for (int i = 0; i < 8; i += 2) {
            even = dot_u8s8(even, w[r].q[i], loadu256(xq + 32 * i));
            odd = dot_u8s8(odd, w[r].q[i + 1], loadu256(xq + 32 * (i + 1)));
          }
          ints = _mm256_add_epi32(even, odd);
        } else {
          // Vectors 0-3 hold each chunk's first group of 16, 4-7 its second:
          // two chains, each lane one group's dot, then each times its scale.
          __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
          for (int i = 0; i < 4; ++i) {
            lo = dot_u8s8(lo, w[r].q[i], loadu256(xq + 32 * i));
            hi = dot_u8s8(hi, w[r].q[i + 4], loadu256(xq + 32 * (i + 4)));
          }
          ints = _mm256_add_epi32(_mm256_mullo_epi32(lo, w[r].sc_lo), _mm256_mullo_epi32(hi, w[r].sc_hi));
        }
        acc[r][t] = accumulate_k<F>(w[r], ints, dx, bsums, dsums, acc[r][t]);
      }
    }
  }
  store_tile(a, acc);
}
