// KvCacheManager: the KV blocks of every sequence, as the scheduler sees them.
// Invariants: a block's reference count equals the number of block tables
// holding it; a block that gets written has count 1; only full blocks of
// verified tokens enter the prefix cache.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"
#include "kv/kv_types.h"
#include "kv/prefix_cache.h"

namespace folio {

struct KvCacheConfig {
  int num_blocks = 0;
  int block_size = kDefaultBlockSize;
  bool enable_prefix_caching = true;
  PrefixCacheOptions cache_options;  // tests force hash collisions here
};

// The cached prefix of a prompt, from find_cached_prefix; pass it straight
// to allocate_slots, which throws if a block of it was evicted meanwhile.
struct PrefixHit {
  std::vector<BlockId> blocks;  // cached full blocks holding the prompt's first tokens
  int num_computed_tokens = 0;  // blocks.size() * block_size, always < the prompt's length
  int num_prompt_tokens = 0;
  std::string cache_salt;
  // Where the hash chain stands after the hit; allocate_slots checks the
  // entries to catch a stale hit.
  std::vector<PrefixCache::EntryId> entries;
  BlockHash chain_hash;
};

// A block the caller must copy (all of its slots, every layer) before the
// next forward: fork gives each child its own copy of the partial block.
struct BlockCopy {
  BlockId src;
  BlockId dst;
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

struct KvUsage {
  int num_blocks = 0;
  int num_free_blocks = 0;          // unused, freed or cached with no reference
  int num_used_blocks = 0;          // referenced by at least one block table
  int num_cached_blocks = 0;        // in the prefix cache, used or free
  int num_cached_hashes = 0;        // distinct hashes of those: what KV-event subscribers hold
  int num_cached_free_blocks = 0;   // cached with no reference: still hits, evicted least recently freed first
  std::int64_t num_empty_slots = 0; // slots of used blocks that hold no token
  int block_size = 0;

  // Share of the used blocks' slots that hold no token (the paging waste).
  double empty_slot_fraction() const {
    return num_used_blocks == 0 ? 0.0
                                : static_cast<double>(num_empty_slots) /
                                      (static_cast<double>(num_used_blocks) * block_size);
  }
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  int block_size() const { return pool_.block_size(); }

  // The longest run of cached full blocks that starts the prompt under this
  // cache salt, stopping short of the prompt's last token (it is recomputed
  // so that there are logits to sample from). Takes no reference. With
  // read_cache false it finds nothing (a prompt that must be computed in
  // full), and the sequence still commits its blocks under its salt.
  PrefixHit find_cached_prefix(std::span<const TokenId> prompt, std::string_view cache_salt = {},
                               bool read_cache = true);

  // Admits a new sequence: it takes the hit's blocks (reviving free cached
  // ones) and slots for num_new_tokens more tokens after them. Returns false,
  // changing nothing, when the pool is short; the sequence then waits.
  bool allocate_slots(SequenceId id, int num_new_tokens, const PrefixHit& hit);
  // Slots for num_new_tokens more tokens of a running sequence (a prefill
  // chunk, a decode token, or speculative tokens). false: nothing changed;
  // the caller preempts someone or waits.
  bool allocate_slots(SequenceId id, int num_new_tokens);
  // Blocks allocate_slots(id, num_new_tokens) would take from the pool.
  int num_blocks_needed(SequenceId id, int num_new_tokens) const;

  // After a step: `verified_tokens` are the sequence's first tokens whose KV
  // is written and which will never be rolled back (prompt and accepted
  // output). Blocks they fill enter the prefix cache. The count never
  // shrinks and never exceeds num_tokens(id).
  void commit(SequenceId id, std::span<const TokenId> verified_tokens);

  // Drops the last num_tokens tokens (rejected speculation); blocks left
  // empty go back to the pool. Verified tokens cannot be rolled back.
  void rollback(SequenceId id, int num_tokens);

  // A finished, aborted or preempted sequence returns its blocks: cached
  // ones stay hits (evicted tail first), the rest are free at once. Returns
  // false when the sequence holds no blocks.
  bool free(SequenceId id);

  // A new sequence `child` that shares the parent's full blocks (n > 1
  // sampling). The parent must have no unverified tokens. A partial last
  // block is not shared: the child gets a fresh block, and the returned copy
  // tells the caller to copy the parent's block into it. nullopt, changing
  // nothing, when no block is free for that copy.
  std::optional<std::vector<BlockCopy>> fork(SequenceId parent, SequenceId child);

  bool contains(SequenceId id) const { return sequences_.contains(id); }
  int num_sequences() const { return static_cast<int>(sequences_.size()); }
  const BlockTable& block_table(SequenceId id) const;
  int num_tokens(SequenceId id) const;           // tokens with a slot, verified or not
  int num_verified_tokens(SequenceId id) const;  // committed so far
  // Appends the slots of positions [begin, end) of a sequence to `out`.
  void slot_mapping(SequenceId id, int begin, int end, std::vector<SlotId>& out) const;

  KvUsage usage() const;
  // KV events (kv/kv_event.h): off until asked for, then logged until taken.
  void record_events(bool on) { pool_.cache().record_events(on); }
  std::vector<KvEvent> take_events() { return pool_.cache().take_events(); }
  const PrefixCacheStats& prefix_cache_stats() const { return pool_.cache().stats(); }
  const BlockPool& pool() const { return pool_; }

 private:
  struct SequenceBlocks {
    explicit SequenceBlocks(int block_size) : block_table(block_size) {}

    BlockTable block_table;
    int num_tokens = 0;
    int num_verified_tokens = 0;
    int num_committed_blocks = 0;  // leading full blocks that commit has seen
    BlockHash chain_hash;          // hash of the last committed block (or the root)
    // Entry the next committed block chains from; nullopt when prefix
    // caching is off.
    std::optional<PrefixCache::EntryId> chain_entry;
    std::string cache_salt;
  };

  SequenceBlocks& state(SequenceId id);
  const SequenceBlocks& state(SequenceId id) const;
  static std::int64_t empty_slots(const SequenceBlocks& s) { return s.block_table.num_slots() - s.num_tokens; }

  bool caching_;
  BlockPool pool_;
  std::unordered_map<SequenceId, SequenceBlocks> sequences_;
  std::int64_t num_empty_slots_ = 0;
};

}  // namespace folio
