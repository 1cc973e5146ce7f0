#include "backend/kv_pool.h"

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

}  // namespace folio
