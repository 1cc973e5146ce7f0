// The SIMD activation quantizer: the rule of quantize_activation_reference
// (activation_quant.h), byte for byte. Max is exact in any order, 127 / amax
// and x * id are single IEEE operations, and cvtps rounds half to even as
// nearbyint does, so both write the same codes.

// Codes of 32 floats times id, stored at q; returns the four int32 vectors
// of codes (elements 0-7, 8-15, 16-23, 24-31) for the sums.
struct Codes32 {
  __m256i part[4];
};

FOLIO_INLINE Codes32 quantize_32(const float* x, __m256 id, std::int8_t* q) {
  Codes32 c;
  for (int p = 0; p < 4; ++p) c.part[p] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * p), id));
  // packs work within 128-bit lanes; the permute restores element order.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(c.part[0], c.part[1]),
                                            _mm256_packs_epi32(c.part[2], c.part[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  return c;
}

// The codes of a block of 256 as 8 chunks of 32, chunk j at 32 j, to the
// kQ8x256Packed order: element 4 i + c of chunk j at 32 i + 4 j + c (an 8 x 8
// transpose of int32 lanes).
FOLIO_INLINE void interleave_group(const std::int8_t* blocks, std::int8_t* dst) {
  __m256i r[8];
  for (int j = 0; j < 8; ++j) r[j] = loadu256(blocks + 32 * j);
  __m256i t[8], u[8];
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_epi32(r[j], r[j + 1]);      // lanes 0 0' 1 1' | 4 4' 5 5'
    t[j + 1] = _mm256_unpackhi_epi32(r[j], r[j + 1]);  // lanes 2 2' 3 3' | 6 6' 7 7'
  }
  for (int j = 0; j < 8; j += 4) {
    u[j] = _mm256_unpacklo_epi64(t[j], t[j + 2]);          // lane 0 of 4 blocks | lane 4
    u[j + 1] = _mm256_unpackhi_epi64(t[j], t[j + 2]);      // lane 1 | lane 5
    u[j + 2] = _mm256_unpacklo_epi64(t[j + 1], t[j + 3]);  // lane 2 | lane 6
    u[j + 3] = _mm256_unpackhi_epi64(t[j + 1], t[j + 3]);  // lane 3 | lane 7
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * i), _mm256_permute2x128_si256(u[i], u[i + 4], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * (i + 4)), _mm256_permute2x128_si256(u[i], u[i + 4], 0x31));
  }
}

void quantize_act(const ActQ8Layout& layout, const float* x, std::byte* row) {
  auto* qs = reinterpret_cast<std::int8_t*>(row);
  const std::int64_t be = layout.block_elems;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const std::int64_t num_blocks = layout.k / be;
  alignas(32) std::int8_t group[256];
  for (std::int64_t b = 0; b < num_blocks; ++b) {
    const float* xb = x + b * be;
    __m256 vmax = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < be; i += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(xb + i), abs_mask));
    const float amax = hmax(vmax);
    float d = amax / 127.0f;
    float id = 127.0f / amax;
    if (!__builtin_isfinite(id)) d = id = 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    std::memcpy(row + layout.d_offset + b * sizeof(float), &d, sizeof(float));
    if (be == 32) {
      const Codes32 c = quantize_32(xb, idv, qs + b * be);
      const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(c.part[0], c.part[1]), _mm256_add_epi32(c.part[2], c.part[3]));
      const std::int32_t s = hsum_epi32(sum);
      std::memcpy(row + layout.sums_offset + b * sizeof(s), &s, sizeof(s));
    } else {
      // Packed: the block's 8 chunks go to the scratch, then are interleaved.
      const bool packed = layout.format == ActFormat::kQ8x256Packed;
      for (std::int64_t i = 0; i < be; i += 32) {
        const Codes32 c = quantize_32(xb + i, idv, (packed ? group : qs + b * be) + i);
        const std::int32_t first = hsum_epi32(_mm256_add_epi32(c.part[0], c.part[1]));
        const std::int32_t second = hsum_epi32(_mm256_add_epi32(c.part[2], c.part[3]));
        const std::int16_t sums[2] = {static_cast<std::int16_t>(first), static_cast<std::int16_t>(second)};
        std::memcpy(row + layout.sums_offset + (b * be + i) / 16 * sizeof(std::int16_t), sums, sizeof(sums));
        if (packed) {
          const float ds = d * static_cast<float>(first + second);
          std::memcpy(row + layout.dsums_offset + (b * be + i) / 32 * sizeof(float), &ds, sizeof(ds));
        }
      }
      if (packed) interleave_group(group, qs + b * be);
    }
  }
}
