#include "backend/kv_pool.h"

#include <cstring>

#include "core/error.h"

namespace folio {
namespace {

constexpr std::size_t kAlign = 64;

std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

DType codes_dtype(KvDType type) {
  switch (type) {
    case KvDType::kF32: return DType::F32;
    case KvDType::kF16: return DType::F16;
    case KvDType::kBF16: return DType::BF16;
    default: return DType::I8;
  }
}

std::int64_t codes_cols(KvDType type, std::int64_t dim) { return is_scaled(type) ? kv_row_bytes(type, dim) : dim; }

void check_dim(KvDType type, std::int64_t dim) {
  if (auto problem = kv_dim_problem(type, dim))
    fail("KV cache type {} cannot hold rows of {} numbers: {}", name(type), dim, *problem);
}

}  // namespace

void KvPool::copy_block(std::int64_t src, std::int64_t dst) const {
  const auto rows_per_block = codes.shape[1] * codes.shape[2];
  const auto code_bytes = static_cast<std::size_t>(rows_per_block * row_bytes());
  std::memcpy(row(dst * rows_per_block), row(src * rows_per_block), code_bytes);
  if (row_scales() > 0)
    std::memcpy(row_scale(dst * rows_per_block), row_scale(src * rows_per_block),
                static_cast<std::size_t>(rows_per_block * row_scales()) * sizeof(std::uint16_t));
}

std::size_t kv_pool_bytes(KvDType type, std::int64_t num_blocks, std::int64_t num_kv_heads, std::int64_t block_size,
                          std::int64_t dim) {
  const auto rows = static_cast<std::size_t>(num_blocks * num_kv_heads * block_size);
  std::size_t bytes = aligned(rows * static_cast<std::size_t>(kv_row_bytes(type, dim)));
  if (is_scaled(type)) bytes += aligned(rows * static_cast<std::size_t>(kv_row_scales(type, dim)) * 2);
  return bytes;
}

KvPool make_kv_pool(const Buffer& buffer, std::size_t& offset, KvDType type, std::int64_t num_blocks,
                    std::int64_t num_kv_heads, std::int64_t block_size, std::int64_t dim) {
  check_dim(type, dim);
  KvPool p;
  p.type = type;
  p.dim = dim;
  p.codes = buffer.view(codes_dtype(type), {num_blocks, num_kv_heads, block_size, codes_cols(type, dim)}, offset);
  offset += aligned(p.codes.bytes());
  if (is_scaled(type)) {
    p.scales = buffer.view(DType::F16, {num_blocks, num_kv_heads, block_size, kv_row_scales(type, dim)}, offset);
    offset += aligned(p.scales.bytes());
  }
  return p;
}

KvPool kv_pool_view(void* codes, void* scales, KvDType type, std::int64_t num_blocks, std::int64_t num_kv_heads,
                    std::int64_t block_size, std::int64_t dim) {
  check_dim(type, dim);
  KvPool p;
  p.type = type;
  p.dim = dim;
  p.codes = Tensor(codes, codes_dtype(type), {num_blocks, num_kv_heads, block_size, codes_cols(type, dim)});
  if (is_scaled(type))
    p.scales = Tensor(scales, DType::F16, {num_blocks, num_kv_heads, block_size, kv_row_scales(type, dim)});
  return p;
}

}  // namespace folio
