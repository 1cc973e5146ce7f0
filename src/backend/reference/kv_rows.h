// Host access to a KV pool's rows, for the backends whose device is the host
// (reference, cpu): a row's codes and scales, and whole-block copies. Nothing
// outside those backends includes this.
#pragma once

#include <cstdint>
#include <cstring>

#include "backend/kv_pool.h"

namespace folio::kv_rows {

inline void* codes(const KvPool& p, std::int64_t r) { return static_cast<char*>(p.codes.data) + r * p.row_bytes(); }

// The row's scales (nullptr for an unscaled type).
inline std::uint16_t* scales(const KvPool& p, std::int64_t r) {
  return p.row_scales() == 0 ? nullptr : static_cast<std::uint16_t*>(p.scales.data) + r * p.row_scales();
}

// Copies block src over block dst, codes and scales.
inline void copy_block(const KvPool& p, std::int64_t src, std::int64_t dst) {
  const std::int64_t rows = p.rows_per_block();
  std::memcpy(codes(p, dst * rows), codes(p, src * rows), static_cast<std::size_t>(rows * p.row_bytes()));
  if (p.row_scales() > 0)
    std::memcpy(scales(p, dst * rows), scales(p, src * rows),
                static_cast<std::size_t>(rows * p.row_scales()) * sizeof(std::uint16_t));
}

}  // namespace folio::kv_rows
