// Reference conversion of rows between float and GGUF's element formats:
// plain float loops, bit-exact with the gguf Python package (gguf.quants), and
// the yardstick every optimised kernel is tested against.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace folio {

// Decodes n elements of `type` at src (n / block_elems whole blocks, at any
// byte alignment) into n floats. Throws Error for a type whose info says it is
// not dequantizable, or for an n that is negative or not whole blocks.
void dequantize_row(DType type, const void* src, float* dst, std::int64_t n);

// Whether quantize_row and quantize_row_weighted can produce `type`.
bool can_quantize(DType type);

// Encodes n floats into n / block_elems blocks of `type` at dst. F32, F16,
// BF16, Q4_0 .. Q8_0 and MXFP4 are byte for byte what gguf.quants.quantize
// writes (Q8_K, which gguf lacks, follows the GGUF reference definition).
// Q2_K .. Q6_K, IQ4_NL, IQ4_XS and NVFP4, which gguf cannot encode, are
// quantize_row_weighted with no importance: a scale search for the least
// squared error. Throws Error where can_quantize is false, n is negative or
// not whole blocks, or a row of a searched type holds a NaN or an infinity.
void quantize_row(DType type, const float* src, void* dst, std::int64_t n);

// Encodes like quantize_row, but chooses each block's scales (and mins) to
// minimise sum_j importance[j] * (x[j] - decoded[j])^2. importance holds n
// non-negative floats (per column of the row, e.g. mean squared activations
// from calibration text); nullptr means no calibration.
//   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: with nullptr, quantize_row's bytes exactly;
//     with importance, per block the better (weighted) of those bytes and a
//     scale search's, so never worse than quantize_row.
//   MXFP4: with nullptr, quantize_row's bytes; with importance, per block the
//     better (weighted) of gguf's power-of-two scale and its two neighbours.
//   Q2_K .. Q6_K, IQ4_NL, IQ4_XS, NVFP4: a scale search; nullptr weighs every
//     element alike, and is what quantize_row does.
//   F32, F16, BF16, Q8_K: importance is ignored.
// For finite input the output decodes to finite numbers (scales beyond f16
// saturate instead of overflowing), and an all-zero block decodes to zeros.
// Throws as quantize_row does, and for importance that is negative or not finite.
void quantize_row_weighted(DType type, const float* src, const float* importance, void* dst, std::int64_t n);

}  // namespace folio
