#include "kv/kv_storage.h"

#include "core/error.h"

namespace folio {
namespace {

// Layers that keep K and V: all but a hybrid model's linear-attention ones,
// whose state lives in kv/StateStorage.
std::int64_t kv_layers(const ModelConfig& c) { return c.num_layers - c.num_recurrent_layers(); }

bool keeps_kv(const ModelConfig& c, std::int64_t layer) {
  return c.recurrent_layers.empty() || !c.recurrent_layers[static_cast<std::size_t>(layer)];
}

}  // namespace

std::uint64_t KvStorage::block_bytes(const ModelConfig& c, std::int64_t block_size, KvCacheDType dtype) {
  const auto rows = static_cast<std::uint64_t>(c.num_kv_heads * block_size);
  const auto row = static_cast<std::uint64_t>(kv_row_total_bytes(dtype.k, c.head_dim) +
                                              kv_row_total_bytes(dtype.v, c.value_head_dim));
  return static_cast<std::uint64_t>(kv_layers(c)) * rows * row;
}

std::int64_t KvStorage::blocks_for_budget(const ModelConfig& c, std::int64_t block_size, KvCacheDType dtype,
                                          std::uint64_t budget_bytes) {
  // Each layer's K and V pools (codes and scales) start 64-byte aligned.
  const auto padding = static_cast<std::uint64_t>(kv_layers(c)) * 4 * 64;
  if (budget_bytes <= padding) return 0;
  return static_cast<std::int64_t>((budget_bytes - padding) / block_bytes(c, block_size, dtype));
}

KvStorage::KvStorage(Backend& backend, const ModelConfig& c, const KvStorageOptions& o)
    : block_size_(o.block_size), dtype_(o.dtype) {
  auto check = [](KvDType type, std::int64_t dim, const char* what) {
    if (auto problem = kv_dim_problem(type, dim))
      fail("KV cache type {} cannot hold this model's {} heads of {} numbers: {}; choose another --kv-cache-dtype",
           name(type), what, dim, *problem);
  };
  check(dtype_.k, c.head_dim, "key");
  check(dtype_.v, c.value_head_dim, "value");
  if (block_size_ <= 0 || block_size_ > 1024) fail("KV block size {} is out of range (1 to 1024)", block_size_);
  bytes_per_block_ = block_bytes(c, block_size_, dtype_);
  num_blocks_ = o.num_blocks > 0 ? o.num_blocks : blocks_for_budget(c, block_size_, dtype_, o.budget_bytes);
  if (num_blocks_ < 1)
    fail("a KV budget of {} bytes holds no block of {} tokens ({} bytes each); give the cache more memory",
         o.budget_bytes, block_size_, bytes_per_block_);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    if (!keeps_kv(c, l)) continue;
    total_bytes_ += kv_pool_bytes(dtype_.k, num_blocks_, c.num_kv_heads, block_size_, c.head_dim);
    total_bytes_ += kv_pool_bytes(dtype_.v, num_blocks_, c.num_kv_heads, block_size_, c.value_head_dim);
  }
  buffer_ = backend.allocate(total_bytes_);
  std::size_t offset = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    PagedKv kv;
    kv.block_size = block_size_;
    if (!keeps_kv(c, l)) {  // no pools: the model never reads this layer's entry
      layers_.push_back(kv);
      continue;
    }
    kv.k = make_kv_pool(buffer_, offset, dtype_.k, num_blocks_, c.num_kv_heads, block_size_, c.head_dim);
    kv.v = make_kv_pool(buffer_, offset, dtype_.v, num_blocks_, c.num_kv_heads, block_size_, c.value_head_dim);
    layers_.push_back(kv);
  }
  FOLIO_CHECK(offset == total_bytes_);
}

}  // namespace folio
