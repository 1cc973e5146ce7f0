// block_map: what every KV block of a pool holds at one moment, one
// character a block, for people to look at (the web page's live grid). It
// reads the pool and changes nothing.
#pragma once

#include <string>

#include "kv/block_pool.h"

namespace folio {

// The characters of a block map.
inline constexpr char kBlockFree = 'f';    // no reference, no cached content
inline constexpr char kBlockInUse = 'u';   // referenced by a block table
inline constexpr char kBlockShared = 's';  // referenced, and a prefix-cache entry: a hit can share it
inline constexpr char kBlockCached = 'c';  // no reference but still a prefix-cache hit (evictable)

// One character per block, block 0 first.
std::string block_map(const BlockPool& pool);

}  // namespace folio
