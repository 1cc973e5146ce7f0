// Activations quantized to 8 bits once per matmul call, for the integer dot
// products of the kQ8 path. The SIMD quantizers write exactly the bytes of the
// scalar reference below (tests compare them with memcmp), so a token's
// quantized row depends on nothing but that token's floats.
#pragma once

#include <cstddef>
#include <cstdint>

namespace folio {

// How the activations of a matmul are handed to its kernels.
enum class ActFormat {
  kF32,     // the f32 rows of x as they are
  kQ8x32,   // blocks of 32 with a float scale and the sum of their codes: for Q4_0 .. Q8_0 weights, packed or not
  kQ8x256,  // blocks of 256 with a float scale and 16 partial sums: for K-quant weights
  kQ8x256Packed,  // kQ8x256 with the codes of each block's 8 chunks of 32 interleaved: for packed K-quants
};

// Byte layout of one token's quantized row of k activations:
//   qs    [k]          int8 codes, at offset 0
//   d     [k / B]      float scale of each block of B = 32 or 256 elements, x ~ d * q
//   sums  kQ8x32:  [k / 32] int32, the sum of each block's codes (for offsets and mins)
//         kQ8x256: [k / 16] int16, the sum of each group of 16 codes
//   dsums kQ8x256Packed only: [k / 32] float, d * float(sum of the codes of
//         each chunk of 32): the activation side of Q4_K/Q5_K's min terms
// then padding to 64 bytes, so that in a 64-byte-aligned buffer every row's
// codes are aligned. k must be a multiple of B.
// kQ8x256Packed is kQ8x256 with each block's codes in the order of packed
// K-quants (packed_weights.h): byte 32 i + 4 j + c of a block is element
// 32 j + 4 i + c (chunk j's elements 4 i .. 4 i + 3); the sums stay in
// element order.
struct ActQ8Layout {
  ActFormat format = ActFormat::kQ8x32;
  std::int64_t k = 0;
  std::int64_t block_elems = 32;
  std::size_t d_offset = 0;
  std::size_t sums_offset = 0;
  std::size_t dsums_offset = 0;  // kQ8x256Packed only
  std::size_t row_bytes = 0;

  static ActQ8Layout make(ActFormat format, std::int64_t k);
};

// The reference quantizer, one token. Per block: amax = max |x|, d = amax / 127,
// q = round-half-even(x * (127 / amax)); a block whose 127 / amax is not
// finite (all zeros, or amax below ~4e-37) gets d = 0 and q = 0.
void quantize_activation_reference(const ActQ8Layout& layout, const float* x, std::byte* row);

// Element i of a quantized row as the float d * q (for tests and tools).
float quantized_activation_value(const ActQ8Layout& layout, const std::byte* row, std::int64_t i);

}  // namespace folio
