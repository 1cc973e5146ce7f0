// The 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, and from
// dot_grid4.inl IQ4_NL, MXFP4, IQ4_XS) against kQ8x32 activations. Each
// format gives a block's 32 codes q, with w = d * (q - kOffset), or
// w = d * q + m where kMin. A format may have E8M0 scales (kE8M0) or decode 8
// blocks at once (kWholeGroups).
//
// The packable formats (Q4_0 .. Q8_0) put rows in lanes: lane j of a vector
// stands for row j of a panel of 8 rows. Per block b and output, in this
// order (the same in every tile shape and in both layouts):
//   isum = [sum(q * xq) of row j's block b]_j - kOffset * sum(xq of block b)   exact int32
//   acc  = fma(float(isum), [d_w of row j]_j * d_x, acc)
//   acc  = fma([m of row j]_j, d_x * float(sum(xq)), acc)                       (kMin only)
// then y = acc (+ bias), lane j to row j: no horizontal sum. Packed
// (packed_weights.h), isum comes from 8 dots of code vector i against 4
// activations broadcast to every lane; in the file's layout, from one dot per
// row and a horizontal-add tree over the 8 rows. Integer sums are exact, so
// both give the same isum, and the same bits.
//
// The other formats (never packed) put blocks in lanes: blocks go in groups
// of 8, so that the float work is done once per group with lane j holding
// block j of the group. Per group and output, in this order:
//   isum = [sum(q * xq) of block j]_j - kOffset * [sum(xq) of block j]_j    exact int32
//   acc  = fma(float(isum), [d_w * d_x of block j]_j, acc)
//   acc  = fma([m of block j]_j, [d_x * sum(xq) of block j]_j, acc)          (kMin only)
// then y = hsum(acc) (+ bias). Lanes past the last block of a row hold zeros;
// lane j comes from a horizontal-add tree over 8 dots (one per block).

// The 8 code vectors of a packed group (packed_weights.h) from its codes
// (after d, m and qh), 32 bytes a vector: vector i = elements 4 i .. 4 i + 3
// of every row.
FOLIO_INLINE void packed_nibbles(const std::byte* p, __m256i (&q)[8]) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  for (int v = 0; v < 4; ++v) {
    const __m256i b = loadu256(p + 32 * v);
    q[v] = _mm256_and_si256(b, low);
    q[v + 4] = _mm256_and_si256(_mm256_srli_epi16(b, 4), low);
  }
}

// Adds bit 4 to the codes of a packed Q5 group from its qh (bit i of byte
// 4 j + c: element 4 i + c of row j).
FOLIO_INLINE void packed_high_bits(const std::byte* qh, __m256i (&q)[8]) {
  const __m256i h = loadu256(qh), bit4 = _mm256_set1_epi8(0x10);
  // 16-bit shifts move bit i of each byte to bit 4; what crosses a byte
  // boundary lands away from bit 4 and is masked off.
  q[0] = _mm256_or_si256(q[0], _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4));
  q[1] = _mm256_or_si256(q[1], _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4));
  q[2] = _mm256_or_si256(q[2], _mm256_and_si256(_mm256_slli_epi16(h, 2), bit4));
  q[3] = _mm256_or_si256(q[3], _mm256_and_si256(_mm256_slli_epi16(h, 1), bit4));
  q[4] = _mm256_or_si256(q[4], _mm256_and_si256(h, bit4));
  q[5] = _mm256_or_si256(q[5], _mm256_and_si256(_mm256_srli_epi16(h, 1), bit4));
  q[6] = _mm256_or_si256(q[6], _mm256_and_si256(_mm256_srli_epi16(h, 2), bit4));
  q[7] = _mm256_or_si256(q[7], _mm256_and_si256(_mm256_srli_epi16(h, 3), bit4));
}

struct Q4_0 {
  static constexpr int kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  static FOLIO_INLINE __m256i codes(const std::byte* b) { return split_nibbles(b + 2); }
  static FOLIO_INLINE __m256i dot(__m256i q, __m256i x) { return dot_u8s8(_mm256_setzero_si256(), q, x); }
  static FOLIO_INLINE void packed_codes(const std::byte* p, __m256i (&q)[8]) {
    packed_nibbles(p, q);
  }
  static FOLIO_INLINE __m256i dot_acc(__m256i acc, __m256i q, __m256i x) { return dot_u8s8(acc, q, x); }
};

struct Q4_1 {
  static constexpr int kBytes = 20;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static FOLIO_INLINE __m256i codes(const std::byte* b) { return split_nibbles(b + 4); }
  static FOLIO_INLINE __m256i dot(__m256i q, __m256i x) { return dot_u8s8(_mm256_setzero_si256(), q, x); }
  static FOLIO_INLINE void packed_codes(const std::byte* p, __m256i (&q)[8]) {
    packed_nibbles(p, q);
  }
  static FOLIO_INLINE __m256i dot_acc(__m256i acc, __m256i q, __m256i x) { return dot_u8s8(acc, q, x); }
};

struct Q5_0 {
  static constexpr int kBytes = 22;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  static FOLIO_INLINE __m256i codes(const std::byte* b) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(b + 2)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(split_nibbles(b + 6), high);
  }
  static FOLIO_INLINE __m256i dot(__m256i q, __m256i x) { return dot_u8s8(_mm256_setzero_si256(), q, x); }
  static FOLIO_INLINE void packed_codes(const std::byte* p, __m256i (&q)[8]) {
    packed_nibbles(p + 32, q);
    packed_high_bits(p, q);
  }
  static FOLIO_INLINE __m256i dot_acc(__m256i acc, __m256i q, __m256i x) { return dot_u8s8(acc, q, x); }
};

struct Q5_1 {
  static constexpr int kBytes = 24;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  static FOLIO_INLINE __m256i codes(const std::byte* b) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(b + 4)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(split_nibbles(b + 8), high);
  }
  static FOLIO_INLINE __m256i dot(__m256i q, __m256i x) { return dot_u8s8(_mm256_setzero_si256(), q, x); }
  static FOLIO_INLINE void packed_codes(const std::byte* p, __m256i (&q)[8]) {
    packed_nibbles(p + 32, q);
    packed_high_bits(p, q);
  }
  static FOLIO_INLINE __m256i dot_acc(__m256i acc, __m256i q, __m256i x) { return dot_u8s8(acc, q, x); }
};

// Q8_0's codes are signed. With VNNI they become q = w + 128 (offset 128, no
// saturation in dpbusd); without it, maddubs takes |w| against x carrying w's
// sign, whose pairs stay within int16 (2 * 128 * 127).
struct Q8_0 {
  static constexpr int kBytes = 34;
  static constexpr int kOffset = FOLIO_MATMUL_VNNI ? 128 : 0;
  static constexpr bool kMin = false;
  // The 32 codes at p, as the dot below takes them.
  static FOLIO_INLINE __m256i codes_at(const std::byte* p) {
#if FOLIO_MATMUL_VNNI
    return _mm256_xor_si256(loadu256(p), _mm256_set1_epi8(static_cast<char>(0x80)));
#else
    return loadu256(p);
#endif
  }
  static FOLIO_INLINE __m256i codes(const std::byte* b) { return codes_at(b + 2); }
  static FOLIO_INLINE __m256i dot(__m256i q, __m256i x) {
#if FOLIO_MATMUL_VNNI
    return dot_u8s8(_mm256_setzero_si256(), q, x);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(x, q)), _mm256_set1_epi16(1));
#endif
  }
  static FOLIO_INLINE void packed_codes(const std::byte* p, __m256i (&q)[8]) {
    for (int i = 0; i < 8; ++i) q[i] = codes_at(p + 32 * i);
  }
  static FOLIO_INLINE __m256i dot_acc(__m256i acc, __m256i q, __m256i x) {
#if FOLIO_MATMUL_VNNI
    return dot_u8s8(acc, q, x);
#else
    return _mm256_add_epi32(acc, dot(q, x));
#endif
  }
};

// Lane j: the sum of the 8 lanes of l[j]. Exact.
FOLIO_INLINE __m256i sum_lanes_8(const __m256i (&l)[8]) {
  const __m256i a01 = _mm256_hadd_epi32(l[0], l[1]), a23 = _mm256_hadd_epi32(l[2], l[3]);
  const __m256i a45 = _mm256_hadd_epi32(l[4], l[5]), a67 = _mm256_hadd_epi32(l[6], l[7]);
  // b0 = [quarter sums 0-3 of l0 l1 l2 l3 | quarter sums 4-7 of the same], b1 likewise for l4 .. l7.
  const __m256i b0 = _mm256_hadd_epi32(a01, a23), b1 = _mm256_hadd_epi32(a45, a67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

// Lanes [0, count) set.
FOLIO_INLINE __m256i first_lanes(int count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The binary16 scale d (and min m, at byte 2) of `count` blocks `stride`
// bytes apart (consecutive blocks of a row, or one block of consecutive
// rows), as floats in lanes [0, count), zeros after.
template <class F>
FOLIO_INLINE void group_scales(const std::byte* first, std::size_t stride, int count, __m256& d, __m256& m) {
  const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm256_set1_epi32(static_cast<std::int32_t>(stride)));
  const __m256i words = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int*>(first), offsets,
                                                    first_lanes(count), 1);
  if constexpr (requires { F::kE8M0; }) {
    if constexpr (F::kE8M0) {
      // e8m0_half_to_f32 per lane: 0x00200000 << e for e < 2, else (e - 1) << 23.
      const __m256i e = _mm256_and_si256(words, _mm256_set1_epi32(0xff));
      const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
      const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
      const __m256i bits = _mm256_blendv_epi8(normal, tiny, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e));
      d = _mm256_and_ps(_mm256_castsi256_ps(bits), _mm256_castsi256_ps(first_lanes(count)));
      return;
    }
  }
  // Low halves (d) to bytes 0-7 of each 128-bit lane, high halves (m) to bytes 8-15.
  const __m256i split = _mm256_shuffle_epi8(
      words, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                              0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
  const __m256i halves = _mm256_permute4x64_epi64(split, 0xd8);  // [d0-3 d4-7 | m0-3 m4-7]
  d = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
  if constexpr (F::kMin) m = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
}

// One group of blocks [g, g + count) of the tile; kFull: count == 8.
template <class F, int R, int T, bool kFull>
FOLIO_INLINE void block32_group(const TileArgs& a, std::int64_t g, int count, __m256 (&acc)[R][T]) {
  const __m256i valid = first_lanes(count);
  if (a.prefetch != nullptr) prefetch_bytes(a.prefetch + g * R * F::kBytes, R * 8 * F::kBytes);
  __m256i q[R][8];
  __m256 dw[R], mw[R];
  for (int r = 0; r < R; ++r) {
    const std::byte* row = a.w + r * a.w_stride + g * F::kBytes;
    if constexpr (requires { F::kWholeGroups; }) {
      F::load_group(row, q[r], dw[r]);  // count is 8
    } else {
      for (int j = 0; j < 8; ++j) q[r][j] = kFull || j < count ? F::codes(row + j * F::kBytes) : _mm256_setzero_si256();
      group_scales<F>(row, F::kBytes, count, dw[r], mw[r]);
    }
  }
  for (int t = 0; t < T; ++t) {
    const std::byte* xr = a.x + t * a.x_stride;
    const std::byte* xq = xr + g * 32;
    const auto* xd = reinterpret_cast<const float*>(xr + a.x_d_offset) + g;
    const auto* xs = reinterpret_cast<const int*>(xr + a.x_sums_offset) + g;
    const __m256 dx = kFull ? _mm256_loadu_ps(xd) : _mm256_maskload_ps(xd, valid);
    const __m256i xsum = kFull ? loadu256(xs) : _mm256_maskload_epi32(xs, valid);
    static_assert((F::kOffset & (F::kOffset - 1)) == 0, "offsets are powers of two");
    constexpr int kShift = F::kOffset != 0 ? __builtin_ctz(F::kOffset) : 0;
    const __m256i xoff = _mm256_slli_epi32(xsum, kShift);  // kOffset * sum(xq)
    __m256 sx;
    if constexpr (F::kMin) sx = _mm256_mul_ps(dx, _mm256_cvtepi32_ps(xsum));
    for (int r = 0; r < R; ++r) {
      __m256i l[8];
      for (int j = 0; j < 8; ++j)
        l[j] = kFull || j < count ? F::dot(q[r][j], loadu256(xq + 32 * j)) : _mm256_setzero_si256();
      __m256i isum = sum_lanes_8(l);
      if constexpr (F::kOffset != 0) isum = _mm256_sub_epi32(isum, xoff);
      acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw[r], dx), acc[r][t]);
      if constexpr (F::kMin) acc[r][t] = _mm256_fmadd_ps(mw[r], sx, acc[r][t]);
    }
  }
}

template <class F, int R, int T>
void tile_q8_block32(const TileArgs& a) {
  const std::int64_t num_blocks = a.k / 32;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  std::int64_t g = 0;
  for (; g + 8 <= num_blocks; g += 8) block32_group<F, R, T, true>(a, g, 8, acc);
  if (g < num_blocks) block32_group<F, R, T, false>(a, g, static_cast<int>(num_blocks - g), acc);
  store_tile(a, acc);
}

// ---- Rows in lanes: the packable formats ----

// y of P panels by T tokens: lane j of acc[p][t] is row 8 p + j, written for
// the a.rows rows that exist.
template <int P, int T>
FOLIO_INLINE void store_panels(const TileArgs& a, const __m256 (&acc)[P][T]) {
  for (int p = 0; p < P; ++p) {
    const std::int64_t valid = a.rows - 8 * p;
    if (valid <= 0) break;
    const __m256i mask = first_lanes(valid < 8 ? static_cast<int>(valid) : 8);
    __m256 bias = _mm256_setzero_ps();
    if (a.bias != nullptr)
      bias = valid >= 8 ? _mm256_loadu_ps(a.bias + 8 * p) : _mm256_maskload_ps(a.bias + 8 * p, mask);
    for (int t = 0; t < T; ++t) {
      const __m256 v = a.bias != nullptr ? _mm256_add_ps(acc[p][t], bias) : acc[p][t];
      float* y = a.y + t * a.y_stride + 8 * p;
      if (valid >= 8) {
        _mm256_storeu_ps(y, v);
      } else {
        _mm256_maskstore_ps(y, mask, v);
      }
    }
  }
}

// One token's scalars of block b: d_x, the codes' sum, kOffset times it and
// (kMin) d_x * float(sum), each in every lane.
template <class F>
struct BlockActivation {
  __m256 dx, sx;
  __m256i xoff;
  FOLIO_INLINE BlockActivation(const TileArgs& a, const std::byte* xr, std::int64_t b) {
    float d;
    std::int32_t sum;
    std::memcpy(&d, xr + a.x_d_offset + b * sizeof(float), sizeof(d));
    std::memcpy(&sum, xr + a.x_sums_offset + b * sizeof(sum), sizeof(sum));
    dx = _mm256_set1_ps(d);
    xoff = _mm256_set1_epi32(sum * F::kOffset);
    sx = _mm256_set1_ps(F::kMin ? d * static_cast<float>(sum) : 0.0f);
  }
  // acc plus a block's isum, rows' d_w (and m_w) in lanes.
  FOLIO_INLINE __m256 accumulate(__m256i isum, __m256 dw, __m256 mw, __m256 acc) const {
    if constexpr (F::kOffset != 0) isum = _mm256_sub_epi32(isum, xoff);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dx), acc);
    if constexpr (F::kMin) acc = _mm256_fmadd_ps(mw, sx, acc);
    return acc;
  }
};

// Packed panels (packed_weights.h): R rows (R / 8 panels) by T tokens. Code
// vector i of a panel meets the token's elements 4 i .. 4 i + 3 of the block
// in every lane, so lane j gathers row j's integer dot.
template <class F, int R, int T>
void tile_q8_panels(const TileArgs& a) {
  constexpr int P = R / 8;
  static_assert(P * 8 == R, "whole panels");
  constexpr int kHalves = F::kMin ? 2 : 1;
  const std::int64_t num_blocks = a.k / 32;
  const std::size_t panel_bytes = 8 * a.w_stride, group_bytes = 8 * F::kBytes;
  __m256 acc[P][T];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < T; ++t) acc[p][t] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    if (a.prefetch != nullptr)
      for (int p = 0; p < P; ++p) prefetch_bytes(a.prefetch + p * panel_bytes + b * group_bytes, group_bytes);
    __m256i q[P][8];
    __m256 dw[P], mw[P];
    for (int p = 0; p < P; ++p) {
      const std::byte* group = a.w + p * panel_bytes + b * group_bytes;
      dw[p] = _mm256_cvtph_ps(loadu128(group));
      mw[p] = F::kMin ? _mm256_cvtph_ps(loadu128(group + 16)) : _mm256_setzero_ps();
      F::packed_codes(group + 16 * kHalves, q[p]);
    }
    const std::byte* xr = a.x;
    for (int t = 0; t < T; ++t, xr += a.x_stride) {
      const BlockActivation<F> x(a, xr, b);
      __m256i xb[8];
      for (int i = 0; i < 8; ++i) xb[i] = _mm256_set1_epi32(static_cast<std::int32_t>(load_u32(xr + 32 * b + 4 * i)));
      for (int p = 0; p < P; ++p) {
        // Two chains of four dots, for latency; integer sums are exact in any order.
        __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256();
        for (int i = 0; i < 8; i += 2) {
          even = F::dot_acc(even, q[p][i], xb[i]);
          odd = F::dot_acc(odd, q[p][i + 1], xb[i + 1]);
        }
        acc[p][t] = x.accumulate(_mm256_add_epi32(even, odd), dw[p], mw[p], acc[p][t]);
      }
    }
  }
  store_panels(a, acc);
}

// The file's layout, rows in lanes: 8 rows (a.rows of them exist) by T
// tokens, one dot per row and block, then the same isum and float work as
// tile_q8_panels.
template <class F, int R, int T>
void tile_q8_rows(const TileArgs& a) {
  static_assert(R == 8, "one panel's rows");
  const int rows = a.rows < 8 ? static_cast<int>(a.rows) : 8;
  const std::int64_t num_blocks = a.k / 32;
  __m256 acc[1][T];
  for (int t = 0; t < T; ++t) acc[0][t] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const std::byte* first = a.w + b * F::kBytes;
    if (a.prefetch != nullptr) prefetch_bytes(a.prefetch + b * 8 * F::kBytes, 8 * F::kBytes);
    __m256i q[8];
    for (int r = 0; r < 8; ++r) q[r] = r < rows ? F::codes(first + r * a.w_stride) : _mm256_setzero_si256();
    __m256 dw, mw;
    group_scales<F>(first, a.w_stride, rows, dw, mw);
    if constexpr (!F::kMin) mw = _mm256_setzero_ps();
    const std::byte* xr = a.x;
    for (int t = 0; t < T; ++t, xr += a.x_stride) {
      const BlockActivation<F> x(a, xr, b);
      const __m256i xv = loadu256(xr + 32 * b);
      __m256i l[8];
      for (int r = 0; r < 8; ++r) l[r] = F::dot(q[r], xv);
      acc[0][t] = x.accumulate(sum_lanes_8(l), dw, mw, acc[0][t]);
    }
  }
  store_panels(a, acc);
}
