#include "kv/block_map.h"

namespace folio {

std::string block_map(const BlockPool& pool) {
  std::string map(static_cast<std::size_t>(pool.num_blocks()), kBlockFree);
  for (BlockId b = 0; b < pool.num_blocks(); ++b) {
    const bool cached = pool.cache().is_cached(b);
    if (pool.ref_count(b) > 0)
      map[static_cast<std::size_t>(b)] = cached ? kBlockShared : kBlockInUse;
    else if (cached)
      map[static_cast<std::size_t>(b)] = kBlockCached;
  }
  return map;
}

}  // namespace folio
