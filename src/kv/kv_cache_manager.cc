#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "core/error.h"

namespace folio {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : caching_(config.enable_prefix_caching),
      pool_(config.num_blocks, config.block_size, config.cache_options) {}

KvCacheManager::SequenceBlocks& KvCacheManager::state(SequenceId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end())
    fail("request {} holds no KV blocks; admit it first with allocate_slots(id, n, find_cached_prefix(...))", id);
  return it->second;
}

const KvCacheManager::SequenceBlocks& KvCacheManager::state(SequenceId id) const {
  return const_cast<KvCacheManager*>(this)->state(id);
}

PrefixHit KvCacheManager::find_cached_prefix(std::span<const TokenId> prompt, std::string_view cache_salt,
                                             bool read_cache) {
  PrefixCache& cache = pool_.cache();
  const int bs = block_size();
  PrefixHit hit;
  hit.num_prompt_tokens = static_cast<int>(prompt.size());
  hit.cache_salt = std::string(cache_salt);
  hit.chain_hash = cache.root_hash(cache_salt);
  if (!caching_ || prompt.empty() || !read_cache) return hit;
  // Full blocks only, and never the last prompt token.
  const std::size_t max_blocks = (prompt.size() - 1) / static_cast<std::size_t>(bs);
  PrefixCache::EntryId parent = PrefixCache::kRoot;
  for (std::size_t i = 0; i < max_blocks; ++i) {
    const auto tokens = prompt.subspan(i * static_cast<std::size_t>(bs), static_cast<std::size_t>(bs));
    const BlockHash h = cache.block_hash(hit.chain_hash, tokens);
    const auto match = cache.lookup(h, parent, tokens, cache_salt);
    if (!match) break;
    hit.blocks.push_back(match->block);
    hit.entries.push_back(match->entry);
    hit.chain_hash = h;
    parent = match->entry;
  }
  hit.num_computed_tokens = static_cast<int>(hit.blocks.size()) * bs;
  return hit;
}

bool KvCacheManager::allocate_slots(SequenceId id, int num_new_tokens, const PrefixHit& hit) {
  if (sequences_.contains(id))
    fail("request {} already holds KV blocks; use allocate_slots(id, n) for a running request, or free it first", id);
  if (num_new_tokens < 0) fail("allocate_slots: num_new_tokens must be >= 0, got {}", num_new_tokens);
  const int bs = block_size();
  FOLIO_CHECK(hit.entries.size() == hit.blocks.size());
  FOLIO_CHECK(hit.num_computed_tokens == static_cast<int>(hit.blocks.size()) * bs);
  int num_revived = 0;
  for (std::size_t i = 0; i < hit.blocks.size(); ++i) {
    if (pool_.cache().entry_of(hit.blocks[i]) != hit.entries[i])
      fail("prefix hit for request {} is stale (block {} was evicted since); call find_cached_prefix "
           "again right before allocate_slots",
           id, hit.blocks[i]);
    if (pool_.ref_count(hit.blocks[i]) == 0) ++num_revived;
  }
  const int num_tokens = hit.num_computed_tokens + num_new_tokens;
  const int num_new_blocks = BlockTable::blocks_for(num_tokens, bs) - static_cast<int>(hit.blocks.size());
  if (num_new_blocks + num_revived > pool_.num_free_blocks()) return false;

  SequenceBlocks s(bs);
  for (BlockId b : hit.blocks) pool_.acquire(b);
  s.block_table.append(hit.blocks);
  auto fresh = pool_.allocate(num_new_blocks);
  FOLIO_CHECK(fresh.has_value());
  s.block_table.append(*fresh);
  s.num_tokens = num_tokens;
  s.num_verified_tokens = hit.num_computed_tokens;
  s.num_committed_blocks = static_cast<int>(hit.blocks.size());
  s.chain_hash = hit.chain_hash;
  if (caching_) s.chain_entry = hit.entries.empty() ? PrefixCache::kRoot : hit.entries.back();
  s.cache_salt = hit.cache_salt;
  if (caching_) pool_.cache().record_query(hit.num_prompt_tokens, hit.num_computed_tokens);
  num_empty_slots_ += empty_slots(s);
  sequences_.emplace(id, std::move(s));
  return true;
}

int KvCacheManager::num_blocks_needed(SequenceId id, int num_new_tokens) const {
  const SequenceBlocks& s = state(id);
  if (num_new_tokens < 0) fail("num_new_tokens must be >= 0, got {}", num_new_tokens);
  return BlockTable::blocks_for(static_cast<std::int64_t>(s.num_tokens) + num_new_tokens, block_size()) -
         s.block_table.num_blocks();
}

bool KvCacheManager::allocate_slots(SequenceId id, int num_new_tokens) {
  const int need = num_blocks_needed(id, num_new_tokens);
  SequenceBlocks& s = state(id);
  auto fresh = pool_.allocate(need);
  if (!fresh) return false;
  num_empty_slots_ -= empty_slots(s);
  s.block_table.append(*fresh);
  s.num_tokens += num_new_tokens;
  num_empty_slots_ += empty_slots(s);
  return true;
}

void KvCacheManager::commit(SequenceId id, std::span<const TokenId> verified_tokens) {
  SequenceBlocks& s = state(id);
  const int n = static_cast<int>(verified_tokens.size());
  if (n > s.num_tokens)
    fail("commit: request {} has {} verified tokens but only {} have KV slots; allocate_slots first", id, n,
         s.num_tokens);
  if (n < s.num_verified_tokens)
    fail("commit: request {} had {} verified tokens, now {}; verified tokens are final (use rollback "
         "only for unverified ones)",
         id, s.num_verified_tokens, n);
  s.num_verified_tokens = n;
  const int bs = block_size();
  PrefixCache& cache = pool_.cache();
  for (; s.num_committed_blocks < n / bs; ++s.num_committed_blocks) {
    if (!s.chain_entry) continue;
    const auto tokens = verified_tokens.subspan(static_cast<std::size_t>(s.num_committed_blocks) * bs,
                                                static_cast<std::size_t>(bs));
    const BlockHash h = cache.block_hash(s.chain_hash, tokens);
    s.chain_entry =
        cache.insert(s.block_table[s.num_committed_blocks], h, *s.chain_entry, s.chain_hash, tokens, s.cache_salt);
    s.chain_hash = h;
  }
}

void KvCacheManager::rollback(SequenceId id, int num_tokens) {
  SequenceBlocks& s = state(id);
  if (num_tokens < 0 || s.num_tokens - num_tokens < s.num_verified_tokens)
    fail("rollback: request {} has {} unverified tokens, cannot drop {}; verified tokens are final", id,
         s.num_tokens - s.num_verified_tokens, num_tokens);
  num_empty_slots_ -= empty_slots(s);
  s.num_tokens -= num_tokens;
  const int keep = BlockTable::blocks_for(s.num_tokens, block_size());
  while (s.block_table.num_blocks() > keep) {
    const BlockId b = s.block_table.pop_back();
    FOLIO_CHECK(pool_.ref_count(b) == 1 && !pool_.cache().is_cached(b));
    pool_.release(std::span<const BlockId>(&b, 1));
  }
  num_empty_slots_ += empty_slots(s);
}

bool KvCacheManager::free(SequenceId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return false;
  SequenceBlocks& s = it->second;
  num_empty_slots_ -= empty_slots(s);
  std::vector<BlockId> tail_first(s.block_table.blocks().rbegin(), s.block_table.blocks().rend());
  pool_.release(tail_first);
  sequences_.erase(it);
  return true;
}

std::optional<std::vector<BlockCopy>> KvCacheManager::fork(SequenceId parent, SequenceId child) {
  if (sequences_.contains(child)) fail("fork: request {} already holds KV blocks; pick a new id for the child", child);
  const SequenceBlocks& p = state(parent);
  if (p.num_tokens != p.num_verified_tokens)
    fail("fork: request {} has {} unverified tokens; commit or roll them back before forking", parent,
         p.num_tokens - p.num_verified_tokens);
  const int bs = block_size();
  const int num_full = p.num_tokens / bs;
  const bool has_partial = p.num_tokens % bs != 0;
  std::vector<BlockCopy> copies;
  SequenceBlocks c = p;
  c.block_table = BlockTable(bs);
  if (has_partial) {
    auto fresh = pool_.allocate(1);
    if (!fresh) return std::nullopt;
    copies.push_back({p.block_table.back(), fresh->front()});
    for (int i = 0; i < num_full; ++i) c.block_table.append(p.block_table[i]);
    c.block_table.append(fresh->front());
  } else {
    c.block_table.append(p.block_table.blocks());
  }
  for (int i = 0; i < num_full; ++i) pool_.acquire(p.block_table[i]);
  num_empty_slots_ += empty_slots(c);
  sequences_.emplace(child, std::move(c));
  return copies;
}

const BlockTable& KvCacheManager::block_table(SequenceId id) const { return state(id).block_table; }
int KvCacheManager::num_tokens(SequenceId id) const { return state(id).num_tokens; }
int KvCacheManager::num_verified_tokens(SequenceId id) const { return state(id).num_verified_tokens; }

void KvCacheManager::slot_mapping(SequenceId id, int begin, int end, std::vector<SlotId>& out) const {
  const SequenceBlocks& s = state(id);
  if (begin < 0 || begin > end || end > s.num_tokens)
    fail("slot_mapping: positions [{}, {}) are outside request {}'s {} tokens", begin, end, id, s.num_tokens);
  s.block_table.slot_mapping(begin, end, out);
}

KvUsage KvCacheManager::usage() const {
  KvUsage u;
  u.num_blocks = pool_.num_blocks();
  u.num_free_blocks = pool_.num_free_blocks();
  u.num_used_blocks = pool_.num_used_blocks();
  u.num_cached_blocks = pool_.cache().num_cached_blocks();
  u.num_cached_hashes = pool_.cache().num_cached_hashes();
  u.num_cached_free_blocks = pool_.num_cached_free_blocks();
  u.num_empty_slots = num_empty_slots_;
  u.block_size = block_size();
  return u;
}

}  // namespace folio
