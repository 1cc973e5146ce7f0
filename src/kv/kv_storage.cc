#include "kv/kv_storage.h"

#include "core/error.h"

namespace folio {
namespace {

// Layers that write K and V: not those that read an earlier layer's, nor a
// hybrid model's linear-attention ones (their state is in kv/StateStorage).
std::int64_t num_writing_layers(const ModelConfig& c) {
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l) n += c.writes_kv(l) ? 1 : 0;
  return n;
}

}  // namespace

std::uint64_t KvStorage::block_bytes(const ModelConfig& c, std::int64_t block_size, KvCacheDType dtype) {
  std::uint64_t bytes = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.writes_kv(l)) continue;
    const auto rows = static_cast<std::uint64_t>(c.num_kv_heads_of(l) * block_size);
    bytes += rows * static_cast<std::uint64_t>(kv_row_total_bytes(dtype.k, c.head_dim_of(l)) +
                                               kv_row_total_bytes(dtype.v, c.value_head_dim_of(l)));
  }
  return bytes;
}

std::int64_t KvStorage::blocks_for_budget(const ModelConfig& c, std::int64_t block_size, KvCacheDType dtype,
                                          std::uint64_t budget_bytes) {
  // Each writing layer's K and V pools (codes and scales) start 64-byte aligned.
  const auto padding = static_cast<std::uint64_t>(num_writing_layers(c)) * 4 * 64;
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
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    check(dtype_.k, c.head_dim_of(l), "key");
    check(dtype_.v, c.value_head_dim_of(l), "value");
  }
  if (block_size_ <= 0 || block_size_ > 1024) fail("KV block size {} is out of range (1 to 1024)", block_size_);
  bytes_per_block_ = block_bytes(c, block_size_, dtype_);
  num_blocks_ = o.num_blocks > 0 ? o.num_blocks : blocks_for_budget(c, block_size_, dtype_, o.budget_bytes);
  if (num_blocks_ < 1)
    fail("a KV budget of {} bytes holds no block of {} tokens ({} bytes each); give the cache more memory",
         o.budget_bytes, block_size_, bytes_per_block_);
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.writes_kv(l)) continue;
    total_bytes_ += kv_pool_bytes(dtype_.k, num_blocks_, c.num_kv_heads_of(l), block_size_, c.head_dim_of(l));
    total_bytes_ += kv_pool_bytes(dtype_.v, num_blocks_, c.num_kv_heads_of(l), block_size_, c.value_head_dim_of(l));
  }
  buffer_ = backend.allocate(total_bytes_);
  std::size_t offset = 0;
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    const std::int64_t source = c.kv_layer_of(l);
    if (source != l) {
      // A layer that reads an earlier layer's cache gets that layer's pools.
      if (source < 0 || source >= l || !c.writes_kv(source))
        fail("model {}: layer {} reads the KV cache of layer {}, which is not an earlier layer that writes one",
             c.name, l, source);
      layers_.push_back(layers_[static_cast<std::size_t>(source)]);
      continue;
    }
    PagedKv kv;
    kv.block_size = block_size_;
    if (c.is_recurrent(l)) {  // no pools: the model never reads this layer's entry
      layers_.push_back(kv);
      continue;
    }
    const std::int64_t heads = c.num_kv_heads_of(l);
    kv.k = make_kv_pool(buffer_, offset, dtype_.k, num_blocks_, heads, block_size_, c.head_dim_of(l));
    kv.v = make_kv_pool(buffer_, offset, dtype_.v, num_blocks_, heads, block_size_, c.value_head_dim_of(l));
    layers_.push_back(kv);
    pools_.push_back(kv);
  }
  FOLIO_CHECK(offset == total_bytes_);
}

}  // namespace folio
