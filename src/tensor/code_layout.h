// Where each element's code lives in a block of a quantized type, found by
// probing the decoder rather than written out per type: a bit of an encoded
// block that changes exactly one decoded element belongs to that element's
// code; the others are scales. It lets one quantizer (model/gptq.h) choose
// every element's code itself once a block's scales are fixed, for every
// type folio writes.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/dtype.h"

namespace folio {

struct CodeLayout {
  DType type;
  int block_elems = 0;
  int bits_per_code = 0;  // each element's code takes values 0 .. 2^bits - 1
  // Bit positions (byte * 8 + bit, least significant first) of element e's
  // code: bits[e * bits_per_code + k] holds bit k of its code.
  std::vector<std::uint16_t> bits;

  int num_codes() const { return 1 << bits_per_code; }
  // Element e's code in block.
  std::uint32_t code(const std::uint8_t* block, int e) const;
  // Sets element e's code in block; its scales and other codes stay.
  void set_code(std::uint8_t* block, int e, std::uint32_t code) const;
};

// The layout of a quantized type folio can write (can_quantize), probed once
// and kept; nullptr for the float types, whose elements are not codes under
// shared scales.
const CodeLayout* code_layout(DType type);

// What each element of block could decode to under the block's scales:
// levels[c * block_elems + e] is element e's value with code c (levels holds
// num_codes() * block_elems floats).
void block_levels(const CodeLayout& layout, const std::uint8_t* block, float* levels);

}  // namespace folio
