#include "kv/kv_storage.h"

#include "core/error.h"

namespace folio {
namespace {

std::uint64_t block_bytes(const ModelConfig& c, std::int64_t block_size, DType dtype) {
  const auto per_number = static_cast<std::uint64_t>(info(dtype).block_bytes);
  return static_cast<std::uint64_t>(c.num_layers * c.num_kv_heads * (c.head_dim + c.value_head_dim) * block_size) *
         per_number;
}

}  // namespace

std::int64_t KvStorage::blocks_for_budget(const ModelConfig& c, std::int64_t block_size, DType dtype,
                                          std::uint64_t budget_bytes) {
  return static_cast<std::int64_t>(budget_bytes / block_bytes(c, block_size, dtype));
}

KvStorage::KvStorage(Backend& backend, const ModelConfig& c, const KvStorageOptions& o)
    : block_size_(o.block_size), dtype_(o.dtype) {
  if (dtype_ != DType::F32 && dtype_ != DType::F16 && dtype_ != DType::BF16)
    fail("KV cache type {} is not supported (f32, f16 and bf16 are)", name(dtype_));
  if (block_size_ <= 0 || block_size_ > 1024) fail("KV block size {} is out of range (1 to 1024)", block_size_);
  bytes_per_block_ = block_bytes(c, block_size_, dtype_);
  num_blocks_ = o.num_blocks > 0 ? o.num_blocks : blocks_for_budget(c, block_size_, dtype_, o.budget_bytes);
  if (num_blocks_ < 1)
    fail("a KV budget of {} bytes holds no block of {} tokens ({} bytes each); give the cache more memory",
         o.budget_bytes, block_size_, bytes_per_block_);
  buffer_ = backend.allocate(total_bytes());
  const std::int64_t elem = info(dtype_).block_bytes;
  std::size_t offset = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    PagedKv kv;
    kv.block_size = block_size_;
    kv.k = buffer_.view(dtype_, {num_blocks_, c.num_kv_heads, block_size_, c.head_dim}, offset);
    offset += kv.k.bytes();
    kv.v = buffer_.view(dtype_, {num_blocks_, c.num_kv_heads, block_size_, c.value_head_dim}, offset);
    offset += kv.v.bytes();
    layers_.push_back(kv);
  }
  FOLIO_CHECK(offset == total_bytes() && elem > 0);
}

}  // namespace folio
