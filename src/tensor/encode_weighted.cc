// Importance-weighted encoders of the 32-element types (Q4_0 .. Q8_0): a scale
// search per block, kept only where it decodes with less weighted error than
// the gguf-exact block, so it is never worse than quantize_row.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "tensor/quant_blocks.h"
#include "tensor/quantize.h"
#include "tensor/scale_search.h"
#include "tensor/weighted_encoders.h"

namespace folio {
namespace {

// sum_j w[j] * (x[j] - decoded[j])^2 of one encoded block, decoded by
// dequantize_row itself so that the comparison is the one a reader makes. NaN
// where the block decodes to NaN or infinity, which then loses every comparison.
template <typename Block>
double decoded_error(DType type, const Block& block, const float* x, const float* w) {
  float y[kBlockElems];
  dequantize_row(type, &block, y, kBlockElems);
  double error = 0.0;
  for (int j = 0; j < kBlockElems; ++j) {
    const double diff = static_cast<double>(x[j]) - static_cast<double>(y[j]);
    error += static_cast<double>(w[j]) * diff * diff;
  }
  return std::isfinite(error) ? error : NAN;
}

void pack_codes(const int* q, std::uint8_t* qs) {
  for (int j = 0; j < kBlockElems / 2; ++j)
    qs[j] = static_cast<std::uint8_t>((q[j] & 0x0f) | ((q[j + kBlockElems / 2] & 0x0f) << 4));
}

void pack_high_bits(const int* q, std::uint8_t* qh) {
  std::uint32_t bits = 0;
  for (int j = 0; j < kBlockElems; ++j) bits |= static_cast<std::uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, sizeof(bits));
}

// Codes 0..31 into a block's nibbles (and, for Q5_*, its high bits).
template <typename Block>
void pack(const int* q, Block& block) {
  pack_codes(q, block.qs);
  if constexpr (std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>) pack_high_bits(q, block.qh);
}

// x = d * c, c in [lo, hi]: the fitted scale stored as f16, and codes re-picked
// for the stored value.
template <typename Block>
Block searched_symmetric(const float* x, const float* w, float amax, int lo, int hi) {
  const Normalized norm = Normalized::of(amax);
  float xn[kBlockElems];
  for (int j = 0; j < kBlockElems; ++j) xn[j] = norm.to_normalized(x[j]);
  Block block{};
  block.d = f32_to_f16_saturated(norm.to_real(fit_scale(xn, w, kBlockElems, lo, hi).scale));
  const float d = f16_to_f32(block.d);
  int c[kBlockElems];
  for (int j = 0; j < kBlockElems; ++j) c[j] = d == 0.0f ? 0 : nearest_code(x[j] / d, lo, hi);
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    for (int j = 0; j < kBlockElems; ++j) block.qs[j] = static_cast<std::int8_t>(c[j]);
  } else {
    for (int j = 0; j < kBlockElems; ++j) c[j] -= lo;  // stored as c - lo
    pack(c, block);
  }
  return block;
}

// x = d * q + m, q in [0, max_code]: likewise.
template <typename Block>
Block searched_affine(const float* x, const float* w, float amax, int max_code) {
  const Normalized norm = Normalized::of(amax);
  float xn[kBlockElems];
  for (int j = 0; j < kBlockElems; ++j) xn[j] = norm.to_normalized(x[j]);
  const ScaleFit fit = fit_scale_offset(xn, w, kBlockElems, max_code, false);
  Block block{};
  block.d = f32_to_f16_saturated(norm.to_real(fit.scale));
  block.m = f32_to_f16_saturated(norm.to_real(fit.offset));
  const float d = f16_to_f32(block.d);
  const float m = f16_to_f32(block.m);
  int q[kBlockElems];
  for (int j = 0; j < kBlockElems; ++j) q[j] = d == 0.0f ? 0 : nearest_code((x[j] - m) / d, 0, max_code);
  pack(q, block);
  return block;
}

template <typename Block>
Block searched_block(const float* x, const float* w, float amax) {
  if constexpr (std::is_same_v<Block, BlockQ4_0>) return searched_symmetric<Block>(x, w, amax, -8, 7);
  if constexpr (std::is_same_v<Block, BlockQ5_0>) return searched_symmetric<Block>(x, w, amax, -16, 15);
  if constexpr (std::is_same_v<Block, BlockQ8_0>) return searched_symmetric<Block>(x, w, amax, -127, 127);
  if constexpr (std::is_same_v<Block, BlockQ4_1>) return searched_affine<Block>(x, w, amax, 15);
  if constexpr (std::is_same_v<Block, BlockQ5_1>) return searched_affine<Block>(x, w, amax, 31);
}

// Without importance this is quantize_row itself; with it, each block keeps
// whichever of the gguf-exact and the searched encodings has the least
// weighted error (gguf's on a tie, and wherever the block holds a NaN or an
// infinity, which have no weighted error to lower; the searched one where
// gguf's scale overflows f16, as it saturates instead).
template <typename Block>
void encode_weighted(DType type, const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  quantize_row(type, x, dst, num_blocks * kBlockElems);
  if (importance == nullptr) return;
  for (std::int64_t i = 0; i < num_blocks; ++i, x += kBlockElems, importance += kBlockElems) {
    float amax = 0.0f;
    bool finite = true;
    for (int j = 0; j < kBlockElems; ++j) {
      finite = finite && std::isfinite(x[j]);
      amax = std::max(amax, std::fabs(x[j]));
    }
    if (!finite || amax == 0.0f) continue;
    float w[kBlockElems];
    block_weights(importance, kBlockElems, w);
    const Block exact = load_block<Block>(dst, i);
    const Block searched = searched_block<Block>(x, w, amax);
    const double searched_error = decoded_error(type, searched, x, w);
    const double exact_error = decoded_error(type, exact, x, w);  // NaN where gguf's f16 scale overflowed
    if (searched_error < exact_error || (std::isnan(exact_error) && !std::isnan(searched_error)))
      store_block(dst, i, searched);
  }
}

}  // namespace

void encode_weighted_q4_0(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_weighted<BlockQ4_0>(DType::Q4_0, x, importance, dst, num_blocks);
}
void encode_weighted_q4_1(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_weighted<BlockQ4_1>(DType::Q4_1, x, importance, dst, num_blocks);
}
void encode_weighted_q5_0(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_weighted<BlockQ5_0>(DType::Q5_0, x, importance, dst, num_blocks);
}
void encode_weighted_q5_1(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_weighted<BlockQ5_1>(DType::Q5_1, x, importance, dst, num_blocks);
}
void encode_weighted_q8_0(const float* x, const float* importance, void* dst, std::int64_t num_blocks) {
  encode_weighted<BlockQ8_0>(DType::Q8_0, x, importance, dst, num_blocks);
}

}  // namespace folio
