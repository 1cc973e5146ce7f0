// K-quant encoders (Q4_K, Q5_K, Q6_K): a weighted scale search per sub-block,
// the sub-block scales then fitted to 6- or 8-bit codes of an f16 super-block
// scale, and every code re-picked for the scales as they are stored.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "tensor/quant_blocks.h"
#include "tensor/scale_search.h"
#include "tensor/weighted_encoders.h"

namespace folio {
namespace {

constexpr int kQ4Groups = kSuperBlockElems / 32;  // Q4_K/Q5_K sub-blocks of 32
constexpr int kQ6Groups = kSuperBlockElems / 16;  // Q6_K sub-blocks of 16
constexpr int kMaxScaleCode = 63;                 // Q4_K/Q5_K's 6-bit scales and mins

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

// ---- Q4_K and Q5_K: x = d * sc * q - dmin * m --------------------------------

struct AffineChoice {
  int sc = 0;
  int m = 0;
  float error = 0.0f;
};

// For one sub-block of 32 and the stored d and dmin: the 6-bit (sc, m) next to
// the fitted ones whose re-picked codes give the least weighted error, and
// those codes.
template <int kMaxCode>
AffineChoice choose_scale_min(const float* x, const float* w, float scale, float min, float d, float dmin,
                              std::uint8_t* codes) {
  const int sc0 = d > 0.0f ? nearest_code(scale / d, 0, kMaxScaleCode) : 0;
  const int m0 = dmin > 0.0f ? nearest_code(min / dmin, 0, kMaxScaleCode) : 0;
  AffineChoice best;
  best.error = INFINITY;
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
      std::uint8_t q[32];
      for (int j = 0; j < 32; ++j) {
        q[j] = static_cast<std::uint8_t>(nearest_code((x[j] + mn) * is, 0, kMaxCode));
        const float diff = x[j] - (s * static_cast<float>(q[j]) - mn);
        error += w[j] * diff * diff;
      }
      if (error < best.error) {
        best = {sc, m, error};
        std::memcpy(codes, q, sizeof(q));
      }
    }
  }
  return best;
}

// Q4_K's and Q5_K's shared header and codes: the 6-bit scales and mins packed
// as the dequantizer reads them back, and each element's code (0..kMaxCode).
template <int kMaxCode>
void encode_affine_super_block(const SuperBlock& sb, std::uint16_t* d_out, std::uint16_t* dmin_out,
                               std::uint8_t* packed_scales, std::uint8_t* codes) {
  float scales[kQ4Groups], mins[kQ4Groups], scale_weight[kQ4Groups], min_weight[kQ4Groups];
  for (int g = 0; g < kQ4Groups; ++g) {
    const ScaleFit fit = fit_scale_offset(sb.x + 32 * g, sb.w + 32 * g, 32, kMaxCode, true);
    scales[g] = fit.scale;
    mins[g] = -fit.offset;
    scale_weight[g] = fit.weight_qq;  // an error of e in the scale costs e^2 * sum w q^2
    min_weight[g] = fit.weight;       // an error of e in the min costs e^2 * sum w
  }
  // The sub-block scales and mins are themselves quantized, with the same search.
  float d = 0.0f;
  float dmin = 0.0f;
  *d_out = sb.to_f16(fit_scale(scales, scale_weight, kQ4Groups, 0, kMaxScaleCode).scale, &d);
  *dmin_out = sb.to_f16(fit_scale(mins, min_weight, kQ4Groups, 0, kMaxScaleCode).scale, &dmin);

  int sc[kQ4Groups], m[kQ4Groups];
  for (int g = 0; g < kQ4Groups; ++g) {
    const AffineChoice c =
        choose_scale_min<kMaxCode>(sb.x + 32 * g, sb.w + 32 * g, scales[g], mins[g], d, dmin, codes + 32 * g);
    sc[g] = c.sc;
    m[g] = c.m;
  }
  // Groups 0-3 in the low 6 bits of bytes 0-3 (scale) and 4-7 (min); groups
  // 4-7 in the nibbles of bytes 8-11 with their top two bits above those.
  for (int g = 0; g < 4; ++g) {
    packed_scales[g] = static_cast<std::uint8_t>(sc[g] | ((sc[g + 4] >> 4) << 6));
    packed_scales[g + 4] = static_cast<std::uint8_t>(m[g] | ((m[g + 4] >> 4) << 6));
    packed_scales[g + 8] = static_cast<std::uint8_t>((sc[g + 4] & 0x0f) | ((m[g + 4] & 0x0f) << 4));
  }
}

// Element 64*c + 32*k + l's low nibble at qs[32*c + l], bits 4k and up.
void pack_k_nibbles(const std::uint8_t* codes, std::uint8_t* qs) {
  for (int c = 0; c < kSuperBlockElems / 64; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = static_cast<std::uint8_t>((codes[64 * c + l] & 0x0f) | ((codes[64 * c + 32 + l] & 0x0f) << 4));
}

// ---- Q6_K: x = d * sc * (q - 32) ---------------------------------------------

constexpr int kQ6Lo = -32;
constexpr int kQ6Hi = 31;

// For one sub-block of 16 and the stored d: the int8 scale next to the fitted
// one whose re-picked codes (offset by 32) give the least weighted error.
int choose_q6_scale(const float* x, const float* w, float scale, float d, std::uint8_t* codes) {
  const int sc0 = d != 0.0f ? nearest_code(scale / d, -128, 127) : 0;
  int best_sc = 0;
  float best_error = INFINITY;
  for (const int dsc : {0, -1, 1}) {
    const int sc = sc0 + dsc;
    if (sc < -128 || sc > 127) continue;
    const float s = d * static_cast<float>(sc);
    const float is = inverse_capped(s);
    float error = 0.0f;
    std::uint8_t q[16];
    for (int j = 0; j < 16; ++j) {
      const int c = nearest_code(x[j] * is, kQ6Lo, kQ6Hi);
      q[j] = static_cast<std::uint8_t>(c - kQ6Lo);
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

}  // namespace

void encode_q4_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kSuperBlockElems) {
    BlockQ4_K block{};  // all zero: an all-zero super-block decodes to zeros
    const float amax = checked_amax(x, i, "q4_k");
    if (amax > 0.0f) {
      const SuperBlock sb(x, importance == nullptr ? nullptr : importance + i * kSuperBlockElems, amax);
      std::uint8_t codes[kSuperBlockElems];
      encode_affine_super_block<15>(sb, &block.d, &block.dmin, block.scales, codes);
      pack_k_nibbles(codes, block.qs);
    }
    store_block(dst, i, block);
  }
}

void encode_q5_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kSuperBlockElems) {
    BlockQ5_K block{};
    const float amax = checked_amax(x, i, "q5_k");
    if (amax > 0.0f) {
      const SuperBlock sb(x, importance == nullptr ? nullptr : importance + i * kSuperBlockElems, amax);
      std::uint8_t codes[kSuperBlockElems];
      encode_affine_super_block<31>(sb, &block.d, &block.dmin, block.scales, codes);
      pack_k_nibbles(codes, block.qs);
      // Bit 4 of element e's code is bit e / 32 of qh[e % 32].
      for (int e = 0; e < kSuperBlockElems; ++e)
        block.qh[e % 32] = static_cast<std::uint8_t>(block.qh[e % 32] | (((codes[e] >> 4) & 1) << (e / 32)));
    }
    store_block(dst, i, block);
  }
}

void encode_q6_k(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kSuperBlockElems) {
    BlockQ6_K block{};
    const float amax = checked_amax(x, i, "q6_k");
    if (amax > 0.0f) {
      const SuperBlock sb(x, importance == nullptr ? nullptr : importance + i * kSuperBlockElems, amax);
      float scales[kQ6Groups], scale_weight[kQ6Groups];
      for (int g = 0; g < kQ6Groups; ++g) {
        const ScaleFit fit = fit_scale(sb.x + 16 * g, sb.w + 16 * g, 16, kQ6Lo, kQ6Hi);
        scales[g] = fit.scale;
        scale_weight[g] = fit.weight_qq;
      }
      float d = 0.0f;
      block.d = sb.to_f16(fit_scale(scales, scale_weight, kQ6Groups, -128, 127).scale, &d);
      std::uint8_t codes[kSuperBlockElems];
      for (int g = 0; g < kQ6Groups; ++g)
        block.scales[g] =
            static_cast<std::int8_t>(choose_q6_scale(sb.x + 16 * g, sb.w + 16 * g, scales[g], d, codes + 16 * g));
      // Element 128*h + r: low nibble at ql[64*h + r % 64] (bits 4*(r / 64)),
      // top two bits at qh[32*h + r % 32] (bits 2*(r / 32)).
      for (int h = 0; h < 2; ++h) {
        const std::uint8_t* q = codes + 128 * h;
        for (int l = 0; l < 64; ++l)
          block.ql[64 * h + l] = static_cast<std::uint8_t>((q[l] & 0x0f) | ((q[l + 64] & 0x0f) << 4));
        for (int l = 0; l < 32; ++l)
          block.qh[32 * h + l] = static_cast<std::uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) |
                                                           ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
      }
    }
    store_block(dst, i, block);
  }
}

}  // namespace folio
