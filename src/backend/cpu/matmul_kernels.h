// MatmulKernels: the matmul kernels compiled for one SIMD level, as a table
// indexed by weight type. A tile kernel computes a block of rows x tokens of
// y; each output is one fixed sequence of float operations, whatever tile it
// falls in, so tiling never changes a result (docs/architecture.md rule 5).
//
// The kernels are hand-written intrinsics rather than Highway: no extra
// dependency, and exact control of the reduction order that rule 5 needs.
// They use 256-bit vectors at every level: on Zen 4 a 512-bit operation costs
// two 256-bit ones, and one layout gives the same bits at every level. The
// AVX-512 builds gain 32 registers (larger tiles) and, with VNNI, dpbusd and
// dpwssd for the integer dot products.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/activation_quant.h"
#include "tensor/dtype.h"

namespace folio {

// One tile: rows [0, R) of w times tokens [0, T) of the activations.
struct TileArgs {
  const std::byte* w = nullptr;  // first weight row of the tile
  std::size_t w_stride = 0;      // bytes between weight rows
  const std::byte* x = nullptr;  // first token's activations: f32 row or quantized row (ActQ8Layout)
  std::size_t x_stride = 0;      // bytes between tokens' activations
  std::int64_t k = 0;            // elements per row
  std::size_t x_d_offset = 0;    // quantized rows: where the scales and sums start (ActQ8Layout)
  std::size_t x_sums_offset = 0;
  std::size_t x_dsums_offset = 0;
  float* y = nullptr;            // y[first token, first row]
  std::int64_t y_stride = 0;     // floats between tokens in y
  const float* bias = nullptr;   // bias[first row], or null
  std::int64_t rows = 0;         // rows of y to write: the tile's R, or fewer in a last panel
  // Weights to prefetch while the tile runs (the rows of a later tile), or
  // null: the tile fetches the same fraction of those bytes as it consumes
  // of its own, so batch-1 decode streams from memory at full rate.
  const std::byte* prefetch = nullptr;
};

using TileFn = void (*)(const TileArgs& args);

// The kernels of one weight type at one precision: tiles of R or P rows by
// T, T / 4, 2 or 1 tokens, P the rows of a panel (1, or 8 where the weights
// lie in panels of 8 rows: packed block32, packed_weights.h). The driver takes
// the largest that fits; R x 1 is the batch-1 decode path. A tile of a last
// panel writes only the rows that exist (TileArgs::rows).
struct WeightKernels {
  static constexpr int kTokenShapes = 4;
  ActFormat act = ActFormat::kF32;
  int rows = 0;                      // R, a multiple of P
  int panel_rows = 1;                // P
  int tokens[kTokenShapes] = {};     // T, T / 4, 2, 1 (descending; T / 4 and 2 may be 1)
  TileFn tiles[2][kTokenShapes] = {};  // [R rows, P rows][token shape]
};

// Quantizes one token's k activations into a row of `layout`.
using QuantizeActFn = void (*)(const ActQ8Layout& layout, const float* x, std::byte* row);
// Decodes n elements (whole blocks) of a row to f32, bit-identical to dequantize_row.
using DequantizeRowFn = void (*)(const void* src, float* dst, std::int64_t n);

inline constexpr int kMaxDTypeId = 41;  // one past the largest GGUF type id with kernels (NVFP4)

struct MatmulKernels {
  WeightKernels q8[kMaxDTypeId];   // kQ8: integer dots over quantized activations
  WeightKernels q8_packed[kMaxDTypeId];  // kQ8 on packed weights (packed_weights.h): Q4_0 .. Q8_0, Q2_K .. Q6_K
  WeightKernels f32[kMaxDTypeId];  // kF32: weights decoded in registers, f32 FMAs
  QuantizeActFn quantize = nullptr;
  DequantizeRowFn dequantize[kMaxDTypeId] = {};
};

// One per SIMD level; call only those the processor has.
const MatmulKernels& matmul_kernels_avx2();
const MatmulKernels& matmul_kernels_avx512();
const MatmulKernels& matmul_kernels_avx512_vnni();

}  // namespace folio
