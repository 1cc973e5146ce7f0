// The matmul kernels compiled for AVX-512 with VNNI: dpbusd and dpwssd for
// the integer dots.
// The kernel sources (*.inl) are included inside a target region, in an
// anonymous namespace, so each level gets its own private copy; every
// multiply and add stays as written (no contraction into FMAs), which keeps
// the decoders bit-exact and the order of operations fixed.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/packed_weights.h"
#include "tensor/quant_blocks.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"))), apply_to = function)
#pragma clang fp contract(off)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#pragma GCC optimize("fp-contract=off")
#endif
#define FOLIO_MATMUL_VNNI 1
#define FOLIO_MATMUL_WIDE 1

namespace folio {
namespace {

#include "backend/cpu/simd_avx.inl"
#include "backend/cpu/quantize_act.inl"
#include "backend/cpu/dot_block32.inl"
#include "backend/cpu/dot_grid4.inl"
#include "backend/cpu/dot_kquants.inl"
#include "backend/cpu/dequant_simd.inl"
#include "backend/cpu/matmul_table.inl"

}  // namespace

const MatmulKernels& matmul_kernels_avx512_vnni() {
  static const MatmulKernels kernels = make_kernels();
  return kernels;
}

}  // namespace folio

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
