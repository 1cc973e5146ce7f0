// Packed weights: the CPU backend's load-time order of block32 (Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0) and K-quant (Q2_K .. Q6_K) tensors, in which codes are
// interleaved so that one dpbusd over a code vector leaves each integer dot
// in its own int32 lane (no horizontal adds): the 8 rows of a panel
// (block32: lane = row) or the 8 chunks of 32 of a super-block (K-quants:
// lane = chunk). A packed tensor keeps its size but for the padding of its
// last panel, and unpacking a row gives back the file's bytes.
//
// Block32: rows go in panels of 8 (kPanelRows; the last one padded with rows
// of zero codes and scales), a panel taking the bytes of its 8 rows. Block b
// of the panel's rows (row j's block of B bytes in lane j) is the group of
// 8 B bytes at 8 b B, in this order:
//   d      [8] binary16 scales, row j at 2 j
//   m      [8] binary16 mins (Q4_1, Q5_1 only)
//   qh     [32] (Q5 only) bit i of byte 4 j + c: bit 4 of element 4 i + c of row j
//   codes  [V][32] byte 4 j + c of vector v: byte 4 v + c of row j's codes
//          (Q4 and Q5: V = 4, low nibble element 4 v + c, high nibble element
//          4 v + c + 16; Q8_0: V = 8, element 4 v + c)
// so that code vector i (elements 4 i .. 4 i + 3 of every row) holds row j
// in int32 lane j, to meet 4 activations of one token broadcast to all lanes
// (kQ8x32, activation_quant.h). Each output is then one lane, accumulated
// block after block, so a panel's 8 outputs are stored as one vector.
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

inline constexpr int kPanelRows = 8;
// Packed storage ends with this many bytes to spare, for vector loads near its end.
inline constexpr std::size_t kPackedSlackBytes = 32;

// Whether rows of `type` can be packed (the five 32-element block formats and
// the five K-quants).
bool is_packable(DType type);

// Rows per panel of a packed `type`: kPanelRows (block32) or 1 (K-quants).
int packed_panel_rows(DType type);

// One panel: `rows` (at most its panel rows) rows of k elements in the file's
// order, row j at src + j * stride -> dst packed (panel rows * row bytes).
void pack_panel(DType type, const std::byte* src, std::size_t stride, int rows, std::byte* dst, std::int64_t k);

// Row `lane` of a packed panel -> dst in the file's order.
void unpack_row(DType type, const std::byte* panel, int lane, std::byte* dst, std::int64_t k);

}  // namespace folio
