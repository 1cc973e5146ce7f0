// Packed weights: the CPU backend's load-time order of block32 (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0) and K-quant (Q2_K .. Q6_K) rows, in which the codes of 8
// blocks of 32 (block32: 8 consecutive blocks; K-quants: the 8 chunks of 32 of
// a super-block) are interleaved, so that one dpbusd over a code vector leaves
// each block's or chunk's integer dot in its own int32 lane (no horizontal
// adds). Packing only moves bytes within a row: a row keeps its size, and
// unpacking gives back the file's bytes.
//
// Block32: each whole group of 8 consecutive blocks of a row (B bytes per
// block, the group at bytes [8 g B, 8 (g + 1) B)) becomes, in this order:
//   d      [8] binary16 scales, block j at 2 j
//   m      [8] binary16 mins (Q4_1, Q5_1 only)
//   qh     [32] (Q5 only) bit i of byte 4 j + c: bit 4 of element 4 i + c of block j
//   codes  [V][32] byte 4 j + c of vector v: byte 4 v + c of block j's codes
//          (Q4 and Q5: V = 4, low nibble element 4 v + c, high nibble element
//          4 v + c + 16; Q8_0: V = 8, element 4 v + c)
// so that code vector i (elements 4 i .. 4 i + 3 of every block) holds block
// j in int32 lane j, as do the kQ8x32Packed activations (activation_quant.h).
// A last group of n < 8 blocks has the same fields with n in place of 8
// (vectors of 4 n bytes): a 32-byte load of its vector i holds its blocks in
// lanes [0, n) and bytes of what follows in the others, which the kernels
// mask off. Such a load may read up to 28 bytes past the row: storage of
// packed rows ends with kPackedSlackBytes to spare.
//
// K-quants: every field keeps its place in the super-block (quant_blocks.h);
// only the code fields are reordered. Element 32 j + p (chunk j, p < 32) goes to
//   4-bit fields (Q4_K/Q5_K qs, Q6_K ql): byte 32 (p % 16 / 4) + 4 j + p % 4,
//          low nibble for p < 16, high nibble for p >= 16
//   2-bit fields (Q2_K/Q3_K qs, Q6_K qh): byte 32 (p / 16) + 4 j + p % 4, bits 2 (p % 16 / 4)
//   1-bit fields (Q3_K hmask, Q5_K qh):   byte 4 j + p % 4, bit p / 4
// so that code vector i (elements 4 i .. 4 i + 3 of every chunk) holds chunk
// j in int32 lane j, as do the kQ8x256Packed activations.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace folio {

inline constexpr int kPackedGroupBlocks = 8;
inline constexpr std::size_t kPackedSlackBytes = 32;

// Whether rows of `type` can be packed (the five 32-element block formats and
// the five K-quants).
bool is_packable(DType type);

// One row of k elements: src in the file's order -> dst packed, and back.
// src and dst do not overlap.
void pack_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k);
void unpack_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k);

}  // namespace folio
