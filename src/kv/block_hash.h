// BlockHash: the 128-bit identity of a full block of tokens together with
// everything before it: H(parent block's hash, the block's token ids). The
// chain starts at a root hash of the request's extra keys (the cache salt),
// so equal tokens under different salts never share a hash chain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "kv/kv_types.h"

namespace folio {

struct BlockHash {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;

  friend bool operator==(const BlockHash&, const BlockHash&) = default;

  // Keeps only the low `bits` bits (0 .. 128). A test hook: with few bits,
  // unrelated blocks collide, which the prefix cache must survive.
  BlockHash truncated(int bits) const;
};

struct BlockHashHasher {
  std::size_t operator()(const BlockHash& h) const noexcept {
    return static_cast<std::size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull));
  }
};

// Not cryptographic: someone who picks token ids could search for a collision,
// which is why a prefix-cache hit also compares the stored tokens.
BlockHash hash_root(std::string_view cache_salt);
BlockHash hash_block(const BlockHash& parent, std::span<const TokenId> tokens);

}  // namespace folio
