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

// Whether quantize_row can produce `type`.
bool can_quantize(DType type);

// Encodes n floats into n / block_elems blocks of `type` at dst, byte for
// byte what gguf.quants.quantize writes (Q8_K, which gguf lacks, follows the
// GGUF reference definition). Throws Error where can_quantize is false or n is
// negative or not whole blocks.
void quantize_row(DType type, const float* src, void* dst, std::int64_t n);

}  // namespace folio
