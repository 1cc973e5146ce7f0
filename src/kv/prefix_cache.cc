#include "kv/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace folio {

PrefixCache::PrefixCache(int num_blocks, int block_size, PrefixCacheOptions options)
    : block_size_(block_size),
      options_(options),
      entries_(static_cast<std::size_t>(num_blocks)),
      tokens_(static_cast<std::size_t>(num_blocks) * static_cast<std::size_t>(block_size)) {
  FOLIO_CHECK(num_blocks >= 0 && block_size > 0);
  FOLIO_CHECK(options.hash_bits >= 0 && options.hash_bits <= 128);
}

std::size_t PrefixCache::check(BlockId block) const {
  FOLIO_CHECK(block >= 0 && static_cast<std::size_t>(block) < entries_.size());
  return static_cast<std::size_t>(block);
}

BlockHash PrefixCache::root_hash(std::string_view cache_salt) const {
  return hash_root(cache_salt).truncated(options_.hash_bits);
}

BlockHash PrefixCache::block_hash(const BlockHash& parent, std::span<const TokenId> tokens) const {
  return hash_block(parent, tokens).truncated(options_.hash_bits);
}

std::span<const TokenId> PrefixCache::tokens_of(BlockId block) const {
  return std::span<const TokenId>(tokens_).subspan(check(block) * block_size_,
                                                   static_cast<std::size_t>(block_size_));
}

BlockId PrefixCache::find(const BlockHash& hash, EntryId parent, std::span<const TokenId> tokens,
                          std::string_view cache_salt) {
  FOLIO_CHECK(tokens.size() == static_cast<std::size_t>(block_size_));
  bool collided = false;
  auto [first, last] = by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const BlockId block = it->second;
    const Entry& e = entries_[static_cast<std::size_t>(block)];
    const auto stored = tokens_of(block);
    const bool same_content = std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end()) &&
                              (e.parent != kRoot || e.cache_salt == cache_salt);
    if (same_content && e.parent == parent) return block;
    // Same content under another parent entry is a stale copy, not a collision.
    if (!same_content) collided = true;
  }
  if (collided) ++stats_.num_collisions;
  return -1;
}

std::optional<PrefixCache::Match> PrefixCache::lookup(const BlockHash& hash, EntryId parent,
                                                      std::span<const TokenId> tokens,
                                                      std::string_view cache_salt) {
  const BlockId block = find(hash, parent, tokens, cache_salt);
  if (block < 0) return std::nullopt;
  return Match{block, entries_[static_cast<std::size_t>(block)].id};
}

PrefixCache::EntryId PrefixCache::insert(BlockId block, const BlockHash& hash, EntryId parent,
                                         const BlockHash& parent_hash, std::span<const TokenId> tokens,
                                         std::string_view cache_salt) {
  FOLIO_CHECK(!is_cached(block));
  if (const BlockId existing = find(hash, parent, tokens, cache_salt); existing >= 0)
    return entries_[static_cast<std::size_t>(existing)].id;
  Entry& e = entries_[static_cast<std::size_t>(block)];
  e.id = next_entry_++;
  e.parent = parent;
  e.hash = hash;
  e.cache_salt = parent == kRoot ? std::string(cache_salt) : std::string();
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_);
  if (!by_hash_.contains(hash)) {
    ++num_cached_hashes_;
    // A first block has no parent for a router: its chain starts at the salt.
    if (record_events_) events_.stored(hash, parent == kRoot ? std::nullopt : std::optional(parent_hash), tokens);
  }
  by_hash_.emplace(hash, block);
  return e.id;
}

void PrefixCache::erase(BlockId block) {
  Entry& e = entries_[check(block)];
  FOLIO_CHECK(e.id != kRoot);
  auto [first, last] = by_hash_.equal_range(e.hash);
  auto it = std::find_if(first, last, [block](const auto& kv) { return kv.second == block; });
  FOLIO_CHECK(it != last);
  by_hash_.erase(it);
  if (!by_hash_.contains(e.hash)) {
    --num_cached_hashes_;
    if (record_events_) events_.removed(e.hash);
  }
  e = Entry{};
}

void PrefixCache::record_query(std::int64_t num_queried_tokens, std::int64_t num_hit_tokens) {
  ++stats_.num_queries;
  if (num_hit_tokens > 0) ++stats_.num_hits;
  stats_.num_queried_tokens += num_queried_tokens;
  stats_.num_hit_tokens += num_hit_tokens;
}

}  // namespace folio
