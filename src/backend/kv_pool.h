// KvPool: one pool (K or V) of a layer's paged KV cache, in one KvDType.
// Row r = (block * num_kv_heads + kv_head) * block_size + offset holds one
// token's numbers for one KV head:
//   codes:  [num_blocks, num_kv_heads, block_size, dim] f32/f16/bf16, or
//           [num_blocks, num_kv_heads, block_size, dim] I8 bytes for the
//           scaled types (q8_0: int8; fp8_e4m3: E4M3 codes)
//   scales: [num_blocks, num_kv_heads, block_size, kv_row_scales(type, dim)]
//           F16 bit patterns, beside the codes, same row order: q8_0 has one
//           per block of 32 numbers along head_dim (numbers 32j..32j+31 of a
//           row use scale j: GGUF's Q8_0, 34 bytes per 32 numbers, with the
//           scales kept apart so that codes stay 8-lane aligned); fp8_e4m3
//           has one per row. Empty for the unscaled types.
// A row's codes and scales are written together, once, by write_kv, and
// decoded row by row as attention reads them (tensor/kv_dtype.h). A block's
// codes and scales move together (copy_blocks), so block ids alone name the
// cache: prefix caching, preemption and speculation need nothing more. This
// is a description of device memory; only a backend reads the rows (the
// host backends through backend/reference/kv_rows.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/buffer.h"
#include "tensor/kv_dtype.h"
#include "tensor/tensor.h"

namespace folio {

struct KvPool {
  KvDType type = KvDType::kF16;
  std::int64_t dim = 0;  // numbers per row: head_dim (K) or value_head_dim (V)
  Tensor codes;
  Tensor scales;

  std::int64_t row_bytes() const { return kv_row_bytes(type, dim); }
  std::int64_t row_scales() const { return kv_row_scales(type, dim); }
  std::int64_t rows_per_block() const { return codes.shape[1] * codes.shape[2]; }
};

// Bytes of a pool of num_blocks blocks, codes and scales.
std::size_t kv_pool_bytes(KvDType type, std::int64_t num_blocks, std::int64_t num_kv_heads, std::int64_t block_size,
                          std::int64_t dim);

// A pool viewed over `buffer` from `offset` (codes, then scales, each
// 64-byte aligned); advances offset past it. Throws for a dim the type
// cannot store.
KvPool make_kv_pool(const Buffer& buffer, std::size_t& offset, KvDType type, std::int64_t num_blocks,
                    std::int64_t num_kv_heads, std::int64_t block_size, std::int64_t dim);

}  // namespace folio
