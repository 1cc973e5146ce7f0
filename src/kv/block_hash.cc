#include "kv/block_hash.h"

#include <cstring>

#include "core/error.h"

namespace folio {
namespace {

// Two lanes, each a bijective 64-bit finaliser (MurmurHash3's fmix64 and
// SplitMix64's), absorbing the same words; the second lane also takes the
// first's output, so the pair mixes as one 128-bit state. For a fixed input
// word each step is a bijection of the state, so no state is ever lost.
std::uint64_t fmix_a(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  x ^= x >> 33;
  return x;
}

std::uint64_t fmix_b(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

class Mixer {
 public:
  Mixer(std::uint64_t domain, const BlockHash& seed) : lo_(seed.lo ^ domain), hi_(seed.hi) {
    absorb(domain);
  }

  void absorb(std::uint64_t word) {
    lo_ = fmix_a(lo_ ^ word);
    hi_ = fmix_b(hi_ + word * 0x9E3779B97F4A7C15ull) ^ rotl(lo_, 29);
  }

  BlockHash finish(std::uint64_t length) {
    absorb(length);
    absorb(0x8000000000000001ull);  // end marker, then a last mix of the lanes
    BlockHash h;
    h.lo = fmix_a(lo_ ^ rotl(hi_, 17));
    h.hi = fmix_b(hi_ ^ h.lo);
    return h;
  }

 private:
  std::uint64_t lo_;
  std::uint64_t hi_;
};

// Different domains keep a root hash from ever equalling a block hash of the
// same bytes.
constexpr std::uint64_t kRootDomain = 0x666F6C696F2D726Full;   // "folio-ro"
constexpr std::uint64_t kBlockDomain = 0x666F6C696F2D626Cull;  // "folio-bl"

}  // namespace

BlockHash BlockHash::truncated(int bits) const {
  FOLIO_CHECK(bits >= 0 && bits <= 128);
  BlockHash h = *this;
  if (bits <= 64) {
    h.hi = 0;
    h.lo = bits == 64 ? h.lo : (bits == 0 ? 0 : (h.lo & ((1ull << bits) - 1)));
  } else if (bits < 128) {
    h.hi &= (1ull << (bits - 64)) - 1;
  }
  return h;
}

BlockHash hash_root(std::string_view cache_salt) {
  Mixer m(kRootDomain, BlockHash{});
  std::size_t i = 0;
  for (; i + 8 <= cache_salt.size(); i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, cache_salt.data() + i, 8);
    m.absorb(w);
  }
  if (i < cache_salt.size()) {
    std::uint64_t w = 0;
    std::memcpy(&w, cache_salt.data() + i, cache_salt.size() - i);
    m.absorb(w);
  }
  return m.finish(cache_salt.size());
}

BlockHash hash_block(const BlockHash& parent, std::span<const TokenId> tokens) {
  Mixer m(kBlockDomain, parent);
  m.absorb(parent.lo);
  m.absorb(parent.hi);
  std::size_t i = 0;
  for (; i + 2 <= tokens.size(); i += 2)
    m.absorb(static_cast<std::uint32_t>(tokens[i]) |
             (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tokens[i + 1])) << 32));
  if (i < tokens.size()) m.absorb(static_cast<std::uint32_t>(tokens[i]));
  return m.finish(tokens.size());
}

}  // namespace folio
