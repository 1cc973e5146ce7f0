// PrefixCache: full blocks of verified tokens, found by their chained hash.
// Invariant: a hit is served only when the stored tokens, the stored parent
// entry (so, by induction, the whole prefix) and the cache salt all equal the
// query's; a hash collision costs a miss, never wrong KV.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/kv_event.h"
#include "kv/kv_types.h"

namespace folio {

struct PrefixCacheStats {
  std::int64_t num_queries = 0;         // prompts looked up (once per admission)
  std::int64_t num_hits = 0;            // of those, served at least one block
  std::int64_t num_queried_tokens = 0;  // prompt tokens looked up
  std::int64_t num_hit_tokens = 0;      // prompt tokens served from the cache
  std::int64_t num_collisions = 0;      // an equal hash held other tokens or salt: not served

  double token_hit_rate() const {
    return num_queried_tokens == 0 ? 0.0 : static_cast<double>(num_hit_tokens) / num_queried_tokens;
  }
};

struct PrefixCacheOptions {
  int hash_bits = 128;  // test hook: fewer bits make unrelated blocks collide
};

class PrefixCache {
 public:
  // The identity of one cached content, never reused; a child block records
  // its parent's entry, so an evicted and reused parent can never vouch for
  // an old child. kRoot is the parent of a request's first block.
  using EntryId = std::uint64_t;
  static constexpr EntryId kRoot = 0;

  struct Match {
    BlockId block;
    EntryId entry;
  };

  PrefixCache(int num_blocks, int block_size, PrefixCacheOptions options = {});

  int block_size() const { return block_size_; }

  BlockHash root_hash(std::string_view cache_salt) const;
  BlockHash block_hash(const BlockHash& parent, std::span<const TokenId> tokens) const;

  // The cached block holding `tokens` right after the prefix `parent`
  // (kRoot: a first block, which must also carry `cache_salt`), or nullopt.
  std::optional<Match> lookup(const BlockHash& hash, EntryId parent, std::span<const TokenId> tokens,
                              std::string_view cache_salt);

  // Registers `block`, a full block of verified tokens, and returns the
  // entry the chain continues from: the block's new entry, or an existing
  // entry with the same parent and content (the block then stays uncached).
  // `parent_hash` is the hash `hash` was chained from (the root hash for a
  // first block); only KV events read it.
  EntryId insert(BlockId block, const BlockHash& hash, EntryId parent, const BlockHash& parent_hash,
                 std::span<const TokenId> tokens, std::string_view cache_salt);

  // Forgets a cached block (it is being reused for other tokens).
  void erase(BlockId block);

  bool is_cached(BlockId block) const { return entries_[check(block)].id != kRoot; }
  EntryId entry_of(BlockId block) const { return entries_[check(block)].id; }
  const BlockHash& hash_of(BlockId block) const { return entries_[check(block)].hash; }
  std::span<const TokenId> tokens_of(BlockId block) const;
  int num_cached_blocks() const { return static_cast<int>(by_hash_.size()); }
  // Distinct hashes among the cached blocks: the block set a subscriber to
  // the KV events holds (two blocks share a hash when a block whose parent
  // was evicted is computed again under the parent's new entry).
  int num_cached_hashes() const { return num_cached_hashes_; }

  // With events on, every hash that joins or leaves the cached set is
  // logged, for take_events() to hand to a publisher after each step.
  void record_events(bool on) { record_events_ = on; }
  std::vector<KvEvent> take_events() { return events_.take(); }

  void record_query(std::int64_t num_queried_tokens, std::int64_t num_hit_tokens);
  const PrefixCacheStats& stats() const { return stats_; }

 private:
  struct Entry {
    EntryId id = kRoot;  // kRoot: the block is not cached
    EntryId parent = kRoot;
    BlockHash hash;
    std::string cache_salt;  // kept for first blocks only; the chain implies it for the rest
  };

  std::size_t check(BlockId block) const;
  // The cached block under `hash` with this parent and content, or -1;
  // counts a collision when an equal hash holds other content.
  BlockId find(const BlockHash& hash, EntryId parent, std::span<const TokenId> tokens, std::string_view cache_salt);

  int block_size_;
  PrefixCacheOptions options_;
  std::vector<Entry> entries_;       // [num_blocks]
  std::vector<TokenId> tokens_;      // [num_blocks * block_size]: each cached block's tokens
  // Several blocks share a hash only after a collision, or when a block whose
  // parent was evicted (unreachable until evicted itself) is computed again
  // under the new parent's entry.
  std::unordered_multimap<BlockHash, BlockId, BlockHashHasher> by_hash_;
  EntryId next_entry_ = 1;
  PrefixCacheStats stats_;
  int num_cached_hashes_ = 0;
  bool record_events_ = false;
  KvEventLog events_;
};

}  // namespace folio
