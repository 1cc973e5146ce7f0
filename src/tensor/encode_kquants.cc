// K-quant encoders (Q2_K .. Q6_K): a weighted scale search per sub-block, the
// sub-block scales (and mins) then fitted to 4-, 6- or 8-bit codes of an f16
// super-block scale, and every code re-picked for the scales as stored.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "tensor/quant_blocks.h"
#include "tensor/scale_search.h"
#include "tensor/weighted_encoders.h"

namespace folio {
namespace {

constexpr int kGroupsOf16 = kSuperBlockElems / 16;  // Q2_K's, Q3_K's and Q6_K's sub-blocks

// The largest magnitude of a super-block; throws for a NaN or infinity, which
// no scale can encode.
float checked_amax(const float* x, std::int64_t block, const char* type) {
  float amax = 0.0f;
  for (int j = 0; j < kSuperBlockElems; ++j) {
    if (!std::isfinite(x[j]))
      fail("cannot quantize to {}: element {} of the row is {}; K-quants encode finite numbers only", type,
           block * kSuperBlockElems + j, x[j]);
    amax = std::max(amax, std::fabs(x[j]));
  }
  return amax;
}

// 1 / scale, capped so that a scale too small for its inverse saturates codes
// instead of making infinities (and 0 * inf = NaN).
float inverse_capped(float scale) {
  return scale == 0.0f ? 0.0f : std::fmax(std::fmin(1.0f / scale, FLT_MAX), -FLT_MAX);
}

// Without importance the K-quants minimise the plain squared error: if a row's
// inputs have equal, uncorrelated variance, that is the expected squared error
// of its dot products. Weighting large weights more would help only if large
// weights met larger activations, which is what calibration (importance) says.
struct SuperBlock {
  Normalized scale;
  float x[kSuperBlockElems];  // the elements, normalized
  float w[kSuperBlockElems];  // their weights

  SuperBlock(const float* src, const float* importance, float amax) : scale(Normalized::of(amax)) {
    for (int j = 0; j < kSuperBlockElems; ++j) x[j] = scale.to_normalized(src[j]);
    block_weights(importance, kSuperBlockElems, w);
  }

  // An f16 super-block scale for the normalized `value`, and that f16 back in
  // normalized units.
  std::uint16_t to_f16(float value, float* stored) const {
    const std::uint16_t h = f32_to_f16_saturated(scale.to_real(value));
    *stored = scale.to_normalized(f16_to_f32(h));
    return h;
  }
};

// ---- Q2_K, Q4_K, Q5_K: x = d * sc * q - dmin * m -----------------------------

// One super-block's scale and min codes, and every element's code.
template <int kGroups>
struct AffineCodes {
  std::uint16_t d = 0;
  std::uint16_t dmin = 0;
  int sc[kGroups] = {};
  int m[kGroups] = {};
  std::uint8_t q[kSuperBlockElems] = {};
};

// For one sub-block and the stored d and dmin: the (sc, m) next to the fitted
// ones whose re-picked codes give the least weighted error, and those codes.
template <int kGroupElems, int kMaxCode, int kMaxScaleCode>
void choose_scale_min(const float* x, const float* w, float scale, float min, float d, float dmin, int* sc_out,
                      int* m_out, std::uint8_t* codes) {
  const int sc0 = d > 0.0f ? nearest_code(scale / d, 0, kMaxScaleCode) : 0;
  const int m0 = dmin > 0.0f ? nearest_code(min / dmin, 0, kMaxScaleCode) : 0;
  float best = INFINITY;
  for (const int dsc : {0, -1, 1}) {
    const int sc = sc0 + dsc;
    if (sc < 0 || sc > kMaxScaleCode) continue;
    for (const int dm : {0, -1, 1}) {
      const int m = m0 + dm;
      if (m < 0 || m > kMaxScaleCode) continue;
      // As the dequantizer computes them.
      const float s = d * static_cast<float>(sc);
      const float mn = dmin * static_cast<float>(m);
      const float is = inverse_capped(s);
      float error = 0.0f;
      std::uint8_t q[kGroupElems];
      for (int j = 0; j < kGroupElems; ++j) {
        q[j] = static_cast<std::uint8_t>(nearest_code((x[j] + mn) * is, 0, kMaxCode));
        const float diff = x[j] - (s * static_cast<float>(q[j]) - mn);
        error += w[j] * diff * diff;
      }
      if (error < best) {
        best = error;
        *sc_out = sc;
        *m_out = m;
        std::memcpy(codes, q, sizeof(q));
      }
    }
  }
}

// Sub-blocks of kGroupElems with codes 0..kMaxCode; their scales and mins
// stored as codes 0..kMaxScaleCode of the super-block's f16 d and dmin.
template <int kGroupElems, int kMaxCode, int kMaxScaleCode>
AffineCodes<kSuperBlockElems / kGroupElems> encode_affine(const SuperBlock& sb) {
  constexpr int kGroups = kSuperBlockElems / kGroupElems;
  float scales[kGroups], mins[kGroups], scale_weight[kGroups], min_weight[kGroups];
  for (int g = 0; g < kGroups; ++g) {
    const float* x = sb.x + kGroupElems * g;
    const ScaleFit fit = fit_scale_offset(x, sb.w + kGroupElems * g, kGroupElems, kMaxCode, true);
    scales[g] = fit.scale;
    mins[g] = -fit.offset;
    scale_weight[g] = fit.weight_qq;  // an error of e in the scale costs e^2 * sum w q^2
    min_weight[g] = fit.weight;       // an error of e in the min costs e^2 * sum w
  }
  // The sub-block scales and mins are themselves quantized, with the same search.
  AffineCodes<kGroups> out;
  float d = 0.0f;
  float dmin = 0.0f;
  out.d = sb.to_f16(fit_scale(scales, scale_weight, kGroups, 0, kMaxScaleCode).scale, &d);
  out.dmin = sb.to_f16(fit_scale(mins, min_weight, kGroups, 0, kMaxScaleCode).scale, &dmin);
  for (int g = 0; g < kGroups; ++g)
    choose_scale_min<kGroupElems, kMaxCode, kMaxScaleCode>(sb.x + kGroupElems * g, sb.w + kGroupElems * g, scales[g],
                                                           mins[g], d, dmin, &out.sc[g], &out.m[g],
                                                           out.q + kGroupElems * g);
  return out;
}

// Q4_K's and Q5_K's 6-bit scales and mins: groups 0-3 in the low 6 bits of
// bytes 0-3 (scale) and 4-7 (min); groups 4-7 in the nibbles of bytes 8-11,
// their top two bits above those of groups 0-3.
void pack_q4_k_scales(const int* sc, const int* m, std::uint8_t* packed) {
  for (int g = 0; g < 4; ++g) {
    packed[g] = static_cast<std::uint8_t>(sc[g] | ((sc[g + 4] >> 4) << 6));
    packed[g + 4] = static_cast<std::uint8_t>(m[g] | ((m[g + 4] >> 4) << 6));
    packed[g + 8] = static_cast<std::uint8_t>((sc[g + 4] & 0x0f) | ((m[g + 4] & 0x0f) << 4));
  }
}

// Element 64*c + 32*k + l's low nibble at qs[32*c + l], bits 4k and up.
void pack_k_nibbles(const std::uint8_t* codes, std::uint8_t* qs) {
  for (int c = 0; c < kSuperBlockElems / 64; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = static_cast<std::uint8_t>((codes[64 * c + l] & 0x0f) | ((codes[64 * c + 32 + l] & 0x0f) << 4));
}

// Q2_K's and Q3_K's low two bits: element 128*h + 32*k + l at qs[32*h + l], bits 2k and up.
void pack_crumbs(const std::uint8_t* codes, std::uint8_t* qs) {
  for (int h = 0; h < kSuperBlockElems / 128; ++h)
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t* q = codes + 128 * h + l;
      qs[32 * h + l] =
          static_cast<std::uint8_t>((q[0] & 3) | ((q[32] & 3) << 2) | ((q[64] & 3) << 4) | ((q[96] & 3) << 6));
    }
}

// ---- Q3_K, Q6_K: x = d * sc * c ------------------------------------------------

// For one sub-block of 16 and the stored d: the scale code next to the fitted
// one whose re-picked codes c (stored as c - kLo) give the least weighted error.
template <int kLo, int kHi, int kScaleLo, int kScaleHi>
int choose_scale(const float* x, const float* w, float scale, float d, std::uint8_t* codes) {
  const int sc0 = d != 0.0f ? nearest_code(scale / d, kScaleLo, kScaleHi) : 0;
  int best_sc = 0;
  float best_error = INFINITY;
  for (const int dsc : {0, -1, 1}) {
    const int sc = sc0 + dsc;
    if (sc < kScaleLo || sc > kScaleHi) continue;
    const float s = d * static_cast<float>(sc);
    const float is = inverse_capped(s);
    float error = 0.0f;
    std::uint8_t q[16];
    for (int j = 0; j < 16; ++j) {
      const int c = nearest_code(x[j] * is, kLo, kHi);
      q[j] = static_cast<std::uint8_t>(c - kLo);
      const float diff = x[j] - s * static_cast<float>(c);
      error += w[j] * diff * diff;
    }
    if (error < best_error) {
      best_error = error;
      best_sc = sc;
      std::memcpy(codes, q, sizeof(q));
    }
  }
  return best_sc;
}

// One super-block of 16 sub-blocks of 16: codes c in [kLo, kHi] (stored as
// c - kLo in q), scale codes in [kScaleLo, kScaleHi] of one f16 d.
struct ScaleCodes {
  std::uint16_t d = 0;
  int sc[kGroupsOf16] = {};
  std::uint8_t q[kSuperBlockElems] = {};
};

template <int kLo, int kHi, int kScaleLo, int kScaleHi>
ScaleCodes encode_scaled(const SuperBlock& sb) {
  float scales[kGroupsOf16], scale_weight[kGroupsOf16];
  for (int g = 0; g < kGroupsOf16; ++g) {
    const ScaleFit fit = fit_scale(sb.x + 16 * g, sb.w + 16 * g, 16, kLo, kHi);
    scales[g] = fit.scale;
    scale_weight[g] = fit.weight_qq;
  }
  ScaleCodes out;
  float d = 0.0f;
  out.d = sb.to_f16(fit_scale(scales, scale_weight, kGroupsOf16, kScaleLo, kScaleHi).scale, &d);
  for (int g = 0; g < kGroupsOf16; ++g)
    out.sc[g] = choose_scale<kLo, kHi, kScaleLo, kScaleHi>(sb.x + 16 * g, sb.w + 16 * g, scales[g], d, out.q + 16 * g);
  return out;
}

// Runs `encode_one(super_block, block)` for every super-block that is not all
// zero; an all-zero one stays the zero block, which decodes to zeros.
template <typename Block, typename EncodeOne>
void encode_rows(const float* x, const float* importance, void* dst, std::int64_t num_blocks, const char* type,
                 EncodeOne encode_one) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kSuperBlockElems) {
    Block block{};
    const float amax = checked_amax(x, i, type);
    if (amax > 0.0f) {
      const SuperBlock sb(x, importance == nullptr ? nullptr : importance + i * kSuperBlockElems, amax);
      encode_one(sb, block);
    }
    store_block(dst, i, block);
  }
}

}  // namespace

void encode_q2_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_rows<BlockQ2_K>(x, importance, dst, num_blocks, "q2_k", [](const SuperBlock& sb, BlockQ2_K& block) {
    const auto codes = encode_affine<16, 3, 15>(sb);
    block.d = codes.d;
    block.dmin = codes.dmin;
    for (int g = 0; g < 16; ++g) block.scales[g] = static_cast<std::uint8_t>(codes.sc[g] | (codes.m[g] << 4));
    pack_crumbs(codes.q, block.qs);
  });
}

void encode_q3_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_rows<BlockQ3_K>(x, importance, dst, num_blocks, "q3_k", [](const SuperBlock& sb, BlockQ3_K& block) {
    // c in [-4, 3] is stored as u = c + 4: low two bits in qs, bit 2 in hmask.
    const ScaleCodes codes = encode_scaled<-4, 3, -32, 31>(sb);
    block.d = codes.d;
    pack_crumbs(codes.q, block.qs);
    for (int e = 0; e < kSuperBlockElems; ++e)
      block.hmask[e % 32] = static_cast<std::uint8_t>(block.hmask[e % 32] | (((codes.q[e] >> 2) & 1) << (e / 32)));
    // The 6-bit scale v = sc + 32 of group g: low 4 bits at scales[g % 8]
    // (bits 4*(g / 8)), high 2 bits at scales[8 + g % 4] (bits 2*(g / 4)).
    for (int g = 0; g < kGroupsOf16; ++g) {
      const int v = codes.sc[g] + 32;
      block.scales[g % 8] = static_cast<std::uint8_t>(block.scales[g % 8] | ((v & 0x0f) << (4 * (g / 8))));
      block.scales[8 + g % 4] = static_cast<std::uint8_t>(block.scales[8 + g % 4] | ((v >> 4) << (2 * (g / 4))));
    }
  });
}

void encode_q4_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_rows<BlockQ4_K>(x, importance, dst, num_blocks, "q4_k", [](const SuperBlock& sb, BlockQ4_K& block) {
    const auto codes = encode_affine<32, 15, 63>(sb);
    block.d = codes.d;
    block.dmin = codes.dmin;
    pack_q4_k_scales(codes.sc, codes.m, block.scales);
    pack_k_nibbles(codes.q, block.qs);
  });
}

void encode_q5_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_rows<BlockQ5_K>(x, importance, dst, num_blocks, "q5_k", [](const SuperBlock& sb, BlockQ5_K& block) {
    const auto codes = encode_affine<32, 31, 63>(sb);
    block.d = codes.d;
    block.dmin = codes.dmin;
    pack_q4_k_scales(codes.sc, codes.m, block.scales);
    pack_k_nibbles(codes.q, block.qs);
    // Bit 4 of element e's code is bit e / 32 of qh[e % 32].
    for (int e = 0; e < kSuperBlockElems; ++e)
      block.qh[e % 32] = static_cast<std::uint8_t>(block.qh[e % 32] | (((codes.q[e] >> 4) & 1) << (e / 32)));
  });
}

void encode_q6_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_rows<BlockQ6_K>(x, importance, dst, num_blocks, "q6_k", [](const SuperBlock& sb, BlockQ6_K& block) {
    const ScaleCodes codes = encode_scaled<-32, 31, -128, 127>(sb);
    block.d = codes.d;
    for (int g = 0; g < kGroupsOf16; ++g) block.scales[g] = static_cast<std::int8_t>(codes.sc[g]);
    // Element 128*h + r: low nibble at ql[64*h + r % 64] (bits 4*(r / 64)),
    // top two bits at qh[32*h + r % 32] (bits 2*(r / 32)).
    for (int h = 0; h < 2; ++h) {
      const std::uint8_t* q = codes.q + 128 * h;
      for (int l = 0; l < 64; ++l)
        block.ql[64 * h + l] = static_cast<std::uint8_t>((q[l] & 0x0f) | ((q[l + 64] & 0x0f) << 4));
      for (int l = 0; l < 32; ++l)
        block.qh[32 * h + l] = static_cast<std::uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) |
                                                         ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
    }
  });
}

}  // namespace folio
