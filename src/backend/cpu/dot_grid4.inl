// The 4-bit grid formats against kQ8x32 activations: IQ4_NL, MXFP4 and
// IQ4_XS as formats of block32_group (dot_block32.inl), NVFP4, whose scales
// cover 16 elements, with a group loop of its own in the same order of
// operations per output.

// The 4-bit grid formats (IQ4_NL, MXFP4, IQ4_XS, NVFP4): a code indexes a
// table of 16 signed values (tensor/quant_blocks.h), looked up with one
// shuffle; the values then meet the activations as Q8_0's codes do (offset by
// 128 for dpbusd, or signed through maddubs, whose pairs stay within int16:
// 2 * 127 * 127).
FOLIO_INLINE __m256i grid_table(const std::int8_t (&values)[16], bool offset) {
  __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
  if (offset) t = _mm_xor_si128(t, _mm_set1_epi8(static_cast<char>(0x80)));
  return _mm256_broadcastsi128_si256(t);
}

// The signed dot of grid values q against x, 8 int32 lanes of 4 products
// each, at every level (no offset: NVFP4 needs the sums of halves of blocks,
// which an offset's correction per block cannot give).
FOLIO_INLINE __m256i dot_signed(__m256i q, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(x, q)), _mm256_set1_epi16(1));
}

// IQ4_NL and MXFP4: a Q4_0 nibble layout after a one-byte (MXFP4: E8M0) or
// two-byte (IQ4_NL: binary16) scale.
template <const std::int8_t (&kValues)[16], int kScaleBytes>
struct Grid32 {
  static constexpr int kBytes = kScaleBytes + 16;
  static constexpr int kOffset = FOLIO_MATMUL_VNNI ? 128 : 0;
  static constexpr bool kMin = false;
  static constexpr bool kE8M0 = kScaleBytes == 1;
  // The 32 grid values of a block, as the dot below takes them.
  static FOLIO_INLINE __m256i codes(const std::byte* b) {
    return _mm256_shuffle_epi8(grid_table(kValues, FOLIO_MATMUL_VNNI), split_nibbles(b + kScaleBytes));
  }
  // The same values, signed (for the decoders).
  static FOLIO_INLINE __m256i values(const std::byte* b) {
    return _mm256_shuffle_epi8(grid_table(kValues, false), split_nibbles(b + kScaleBytes));
  }
  static FOLIO_INLINE float scale(const std::byte* b) {
    if constexpr (kE8M0) return e8m0_half_to_f32(std::to_integer<std::uint8_t>(b[0]));
    return load_f16(b);
  }
  static FOLIO_INLINE __m256i dot(__m256i q, __m256i x) {
#if FOLIO_MATMUL_VNNI
    return dot_u8s8(_mm256_setzero_si256(), q, x);
#else
    return dot_signed(q, x);
#endif
  }
};

using IQ4_NL = Grid32<kIq4Values, 2>;
using MXFP4 = Grid32<kFp4Values, 1>;

// IQ4_XS: 8 groups of 32 per 136-byte super-block, 17 bytes per group on
// average, so that group g of a row starts at super-block g / 8 when g is a
// multiple of 8 (always: rows are whole super-blocks). load_group decodes a
// whole super-block: lane j of d is group j's scale d * (l_j - 32).
struct IQ4_XS {
  static constexpr int kBytes = 17;
  static constexpr int kOffset = FOLIO_MATMUL_VNNI ? 128 : 0;
  static constexpr bool kMin = false;
  static constexpr bool kWholeGroups = true;
  static FOLIO_INLINE void scales(const std::byte* b, float (&scale)[8]) {
    const float d = load_f16(b);
    std::uint16_t high;
    std::memcpy(&high, b + 2, sizeof(high));
    for (int g = 0; g < 8; ++g) {
      const int low = (std::to_integer<int>(b[4 + g / 2]) >> (4 * (g % 2))) & 0x0f;
      const int l = low | (((high >> (2 * g)) & 3) << 4);
      scale[g] = d * static_cast<float>(l - 32);
    }
  }
  static FOLIO_INLINE void load_group(const std::byte* b, __m256i (&q)[8], __m256& d) {
    alignas(32) float scale[8];
    scales(b, scale);
    d = _mm256_load_ps(scale);
    const __m256i table = grid_table(kIq4Values, FOLIO_MATMUL_VNNI);
    for (int j = 0; j < 8; ++j) q[j] = _mm256_shuffle_epi8(table, split_nibbles(b + 8 + 16 * j));
  }
  static FOLIO_INLINE __m256i dot(__m256i q, __m256i x) { return Grid32<kIq4Values, 2>::dot(q, x); }
};

// ue4m3_half_to_f32 of the byte in each int32 lane, exactly: normal values
// (exponent e > 0) are 2^(e - 8) * (1 + man / 8), built as float bits;
// subnormal ones man * 2^-10; 0x7f is 0.
FOLIO_INLINE __m256 ue4m3_half_lanes(__m256i x) {
  const __m256i exp = _mm256_and_si256(_mm256_srli_epi32(x, 3), _mm256_set1_epi32(0x0f));
  const __m256i man = _mm256_and_si256(x, _mm256_set1_epi32(0x07));
  const __m256i normal =
      _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(exp, _mm256_set1_epi32(119)), 23), _mm256_slli_epi32(man, 20));
  const __m256 tiny = _mm256_mul_ps(_mm256_cvtepi32_ps(man), _mm256_set1_ps(0x1p-10f));
  const __m256 value = _mm256_blendv_ps(_mm256_castsi256_ps(normal), tiny,
                                        _mm256_castsi256_ps(_mm256_cmpeq_epi32(exp, _mm256_setzero_si256())));
  return _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(x, _mm256_set1_epi32(0x7f))), value);
}

// NVFP4: 64 elements in 36 bytes, two activation blocks per NVFP4 block.
struct NVFP4 {
  static constexpr int kBytes = 36;
  static constexpr int kBytesPer32 = kBytes / 2;  // for prefetching
  // The 32 signed grid values of activation block `half` (0 or 1) of the NVFP4
  // block at b, in element order: groups 2 half and 2 half + 1, each 8 low
  // nibbles then 8 high ones.
  static FOLIO_INLINE __m256i values(const std::byte* b, int half) {
    const __m128i bytes = loadu128(b + 4 + 16 * half);
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i low = _mm_and_si128(bytes, mask);
    const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    const __m256i nibbles = _mm256_set_m128i(_mm_unpackhi_epi64(low, high), _mm_unpacklo_epi64(low, high));
    return _mm256_shuffle_epi8(grid_table(kFp4Values, false), nibbles);
  }
};

// One group of activation blocks [g, g + count) (g a multiple of 8, count even)
// against NVFP4 weights. Per group and output, in this order:
//   lo, hi = [sum(q * xq) over the first, second 16 elements of block j]_j   exact int32
//   acc = fma(float(lo), [d_w of the first 16 * d_x of block j]_j, acc)
//   acc = fma(float(hi), [d_w of the second 16 * d_x of block j]_j, acc)
// then y = hsum(acc) (+ bias). The lanes of a block's dot hold its first 16
// products in 0-3 and the second 16 in 4-7, so the horizontal-add tree of
// sum_lanes_8, stopped before its last add, gives lo and hi.
template <int R, int T, bool kFull>
FOLIO_INLINE void nvfp4_group(const TileArgs& a, std::int64_t g, int count, __m256 (&acc)[R][T]) {
  const __m256i valid = first_lanes(count);
  if (a.prefetch != nullptr) prefetch_bytes(a.prefetch + g * R * NVFP4::kBytesPer32, R * 8 * NVFP4::kBytesPer32);
  __m256i q[R][8];
  __m256 dlo[R], dhi[R];
  // The scale bytes of the group's blocks: dword i of `words` is block i's d[0..3].
  const __m128i block_offsets = _mm_setr_epi32(0, NVFP4::kBytes, 2 * NVFP4::kBytes, 3 * NVFP4::kBytes);
  const __m128i whole_blocks = _mm_cmpgt_epi32(_mm_set1_epi32(count / 2), _mm_setr_epi32(0, 1, 2, 3));
  for (int r = 0; r < R; ++r) {
    const std::byte* row = a.w + r * a.w_stride + g / 2 * NVFP4::kBytes;
    for (int j = 0; j < 8; ++j)
      q[r][j] = kFull || j < count ? NVFP4::values(row + j / 2 * NVFP4::kBytes, j % 2) : _mm256_setzero_si256();
    const __m128i words = _mm_mask_i32gather_epi32(_mm_setzero_si128(), reinterpret_cast<const int*>(row),
                                                   block_offsets, whole_blocks, 1);
    // Activation block j = 2 i + h uses d[2 h] and d[2 h + 1] of block i: the
    // even bytes of `words` in order, and the odd ones.
    const __m128i lo =
        _mm_shuffle_epi8(words, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1));
    const __m128i hi =
        _mm_shuffle_epi8(words, _mm_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -1, -1, -1, -1, -1, -1, -1));
    dlo[r] = ue4m3_half_lanes(_mm256_cvtepu8_epi32(lo));
    dhi[r] = ue4m3_half_lanes(_mm256_cvtepu8_epi32(hi));
  }
  for (int t = 0; t < T; ++t) {
    const std::byte* xr = a.x + t * a.x_stride;
    const std::byte* xq = xr + g * 32;
    const auto* xd = reinterpret_cast<const float*>(xr + a.x_d_offset) + g;
    const __m256 dx = kFull ? _mm256_loadu_ps(xd) : _mm256_maskload_ps(xd, valid);
    for (int r = 0; r < R; ++r) {
      __m256i l[8];
      for (int j = 0; j < 8; ++j)
        l[j] = kFull || j < count ? dot_signed(q[r][j], loadu256(xq + 32 * j)) : _mm256_setzero_si256();
      const __m256i a01 = _mm256_hadd_epi32(l[0], l[1]), a23 = _mm256_hadd_epi32(l[2], l[3]);
      const __m256i a45 = _mm256_hadd_epi32(l[4], l[5]), a67 = _mm256_hadd_epi32(l[6], l[7]);
      // b0 = [first halves of blocks 0-3 | second halves of blocks 0-3], b1 for blocks 4-7.
      const __m256i b0 = _mm256_hadd_epi32(a01, a23), b1 = _mm256_hadd_epi32(a45, a67);
      const __m256i lo = _mm256_permute2x128_si256(b0, b1, 0x20), hi = _mm256_permute2x128_si256(b0, b1, 0x31);
      acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_mul_ps(dlo[r], dx), acc[r][t]);
      acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), _mm256_mul_ps(dhi[r], dx), acc[r][t]);
    }
  }
}

template <int R, int T>
void tile_q8_nvfp4(const TileArgs& a) {
  const std::int64_t num_blocks = a.k / 32;
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  std::int64_t g = 0;
  for (; g + 8 <= num_blocks; g += 8) nvfp4_group<R, T, true>(a, g, 8, acc);
  if (g < num_blocks) nvfp4_group<R, T, false>(a, g, static_cast<int>(num_blocks - g), acc);
  store_tile(a, acc);
}
