// KvTestDriver: drives a KvCacheManager the way a scheduler and model runner
// would, and keeps a shadow of what every KV slot holds, so that each step
// can be checked against the truth: every slot a request reads holds exactly
// the KV of that request's own prefix (whoever wrote it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kv/block_table.h"
#include "kv/kv_cache_manager.h"

namespace folio::testing {

class KvTestDriver {
 public:
  // What the model would hold for a request: its tokens and, per position,
  // the id of the prefix (cache salt, tokens[0..p]) whose KV sits there.
  struct Request {
    std::string salt;
    std::vector<TokenId> tokens;  // written ones first; the rest is prompt still to prefill
    std::vector<std::int64_t> prefix;  // [tokens.size()]
    int num_written = 0;               // == kv.num_tokens(id)
    int num_verified = 0;              // == kv.num_verified_tokens(id)
  };

  explicit KvTestDriver(const KvCacheConfig& config)
      : kv_(config),
        block_size_(config.block_size),
        slots_(static_cast<std::size_t>(config.num_blocks) * config.block_size, -1) {
    kv_.record_events(true);
  }

  KvCacheManager& kv() { return kv_; }
  const KvCacheManager& kv() const { return kv_; }
  const std::map<SequenceId, Request>& requests() const { return requests_; }
  const Request& request(SequenceId id) const { return requests_.at(id); }
  // The first broken invariant, or "" when all held so far.
  const std::string& error() const { return error_; }

  // A new request: finds its cached prefix (checking the hit holds exactly
  // this prefix), then writes and commits up to `chunk` more prompt tokens.
  // nullopt when the pool is short (nothing changed).
  std::optional<int> admit(SequenceId id, std::vector<TokenId> prompt, const std::string& salt = "",
                           int chunk = -1) {
    Request r;
    r.salt = salt;
    r.tokens = std::move(prompt);
    intern_prefix(r);
    const PrefixHit hit = kv_.find_cached_prefix(r.tokens, salt);
    const int remaining = static_cast<int>(r.tokens.size()) - hit.num_computed_tokens;
    const int n = chunk < 0 ? remaining : std::min(chunk, remaining);
    if (!kv_.allocate_slots(id, n, hit)) return std::nullopt;
    // The hit blocks hold the KV of exactly this salt and prefix.
    const BlockTable& table = kv_.block_table(id);
    for (int p = 0; p < hit.num_computed_tokens; ++p)
      expect(slots_[static_cast<std::size_t>(table.slot(p))] == r.prefix[static_cast<std::size_t>(p)],
             fmt::format("request {}: hit position {} (block {}) holds another prefix", id, p,
                         table[p / block_size_]));
    r.num_written = hit.num_computed_tokens;
    r.num_verified = hit.num_computed_tokens;
    auto [it, inserted] = requests_.emplace(id, std::move(r));
    expect(inserted, fmt::format("request {} admitted twice", id));
    write(id, it->second, n);
    commit(id, it->second.num_written);
    check();
    return hit.num_computed_tokens;
  }

  // The next `chunk` prompt tokens of a running request; false: pool short.
  bool prefill(SequenceId id, int chunk) {
    Request& r = requests_.at(id);
    const int n = std::min(chunk, static_cast<int>(r.tokens.size()) - r.num_written);
    if (!kv_.allocate_slots(id, n)) return false;
    write(id, r, n);
    commit(id, r.num_written);
    check();
    return true;
  }

  // Output tokens: verified ones (plain decode) are committed at once,
  // unverified ones (speculative drafts) wait for accept(). false: pool short.
  bool append(SequenceId id, const std::vector<TokenId>& tokens, bool verified) {
    Request& r = requests_.at(id);
    expect(r.num_written == static_cast<int>(r.tokens.size()), "append before the prompt is prefilled");
    if (!kv_.allocate_slots(id, static_cast<int>(tokens.size()))) return false;
    r.tokens.insert(r.tokens.end(), tokens.begin(), tokens.end());
    intern_prefix(r);
    write(id, r, static_cast<int>(tokens.size()));
    if (verified) commit(id, r.num_written);
    check();
    return true;
  }

  // Speculation verified: the first num_accepted unverified tokens stay,
  // the rest are rolled back.
  void accept(SequenceId id, int num_accepted) {
    Request& r = requests_.at(id);
    const int num_rejected = r.num_written - r.num_verified - num_accepted;
    kv_.rollback(id, num_rejected);
    r.num_written -= num_rejected;
    r.tokens.resize(static_cast<std::size_t>(r.num_written));
    r.prefix.resize(static_cast<std::size_t>(r.num_written));
    commit(id, r.num_written);
    check();
  }

  void free(SequenceId id) {
    expect(kv_.free(id), fmt::format("free({}) found no request", id));
    requests_.erase(id);
    check();
  }

  // n > 1: the child shares the parent's full blocks; the driver performs
  // the returned copies the way the model runner would.
  std::optional<std::vector<BlockCopy>> fork(SequenceId parent, SequenceId child) {
    auto copies = kv_.fork(parent, child);
    if (!copies) return copies;
    for (const BlockCopy& c : *copies) {
      expect(kv_.pool().ref_count(c.dst) == 1, "fork copies into a shared block");
      std::copy_n(slots_.begin() + static_cast<std::ptrdiff_t>(c.src) * block_size_, block_size_,
                  slots_.begin() + static_cast<std::ptrdiff_t>(c.dst) * block_size_);
    }
    Request r = requests_.at(parent);
    r.tokens.resize(static_cast<std::size_t>(r.num_written));
    r.prefix.resize(static_cast<std::size_t>(r.num_written));
    requests_.emplace(child, std::move(r));
    check();
    return copies;
  }

  // Every invariant of the KV cache; returns false (and sets error()) at
  // the first broken one. Every operation above ends with it.
  bool check() {
    if (!error_.empty()) return false;
    const BlockPool& pool = kv_.pool();
    const PrefixCache& cache = pool.cache();
    const int num_blocks = pool.num_blocks();
    const KvUsage u = kv_.usage();
    expect(u.num_free_blocks + u.num_used_blocks == u.num_blocks, "free + used != total");
    expect(u.num_free_blocks == pool.free_queue().size(), "free count != free queue length");

    std::vector<int> refs(static_cast<std::size_t>(num_blocks), 0);
    std::int64_t empty_slots = 0;
    for (const auto& [id, r] : requests_) {
      const BlockTable& table = kv_.block_table(id);
      for (BlockId b : table.blocks()) ++refs[static_cast<std::size_t>(b)];
      expect(kv_.num_tokens(id) == r.num_written, fmt::format("request {}: token count drifted", id));
      expect(kv_.num_verified_tokens(id) == r.num_verified, fmt::format("request {}: verified count drifted", id));
      expect(table.num_blocks() == BlockTable::blocks_for(r.num_written, block_size_),
             fmt::format("request {}: {} blocks for {} tokens", id, table.num_blocks(), r.num_written));
      empty_slots += table.num_slots() - r.num_written;
      // Every slot the request reads holds the KV of its own prefix.
      for (int p = 0; p < r.num_written; ++p)
        if (slots_[static_cast<std::size_t>(table.slot(p))] != r.prefix[static_cast<std::size_t>(p)]) {
          expect(false, fmt::format("request {}: position {} holds another prefix's KV", id, p));
          break;
        }
      // A cached block of a request lies within its verified tokens.
      for (int i = 0; i < table.num_blocks(); ++i)
        if (cache.is_cached(table[i]))
          expect((i + 1) * block_size_ <= r.num_verified,
                 fmt::format("request {}: cached block {} holds unverified tokens", id, table[i]));
    }
    expect(empty_slots == u.num_empty_slots, "empty slot count drifted");

    int num_cached = 0;
    int num_cached_free = 0;
    for (BlockId b = 0; b < num_blocks; ++b) {
      const int ref = pool.ref_count(b);
      expect(ref == refs[static_cast<std::size_t>(b)],
             fmt::format("block {}: ref count {} but {} block-table references", b, ref,
                         refs[static_cast<std::size_t>(b)]));
      expect((ref == 0) == pool.free_queue().contains(b), fmt::format("block {}: free queue disagrees", b));
      if (!cache.is_cached(b)) continue;
      ++num_cached;
      if (ref == 0) ++num_cached_free;
      // A cached block holds verified KV of the tokens the cache says.
      const auto tokens = cache.tokens_of(b);
      for (int o = 0; o < block_size_; ++o) {
        const std::int64_t node = slots_[static_cast<std::size_t>(b) * block_size_ + o];
        if (node < 0 || !verified_.contains(node) || nodes_[static_cast<std::size_t>(node)].token != tokens[o] ||
            (o > 0 && nodes_[static_cast<std::size_t>(node)].parent !=
                          slots_[static_cast<std::size_t>(b) * block_size_ + o - 1])) {
          expect(false, fmt::format("cached block {} slot {} does not hold the verified tokens it is cached for", b, o));
          break;
        }
      }
    }
    expect(num_cached == cache.num_cached_blocks(), "cached block count drifted");
    check_events();
    expect(num_cached_free == pool.num_cached_free_blocks(), "cached free block count drifted");
    return error_.empty();
  }

 private:
  struct Node {
    std::int64_t parent;  // -1 for a first token
    TokenId token;
  };

  // A KV-event subscriber that replays every event holds exactly the
  // distinct hashes of the cached blocks: never told of a hash twice, never
  // of a removal it did not hold.
  void check_events() {
    for (const KvEvent& e : kv_.take_events()) {
      if (e.kind == KvEvent::Kind::kAllCleared) {
        subscriber_.clear();
        continue;
      }
      if (e.kind == KvEvent::Kind::kStored)
        expect(e.token_ids.size() == e.block_hashes.size() * static_cast<std::size_t>(e.block_size) &&
                   e.block_size == block_size_,
               "a BlockStored event's tokens do not fill its blocks");
      for (std::uint64_t h : e.block_hashes) {
        if (e.kind == KvEvent::Kind::kStored)
          expect(subscriber_.insert(h).second, fmt::format("hash {:x} stored twice", h));
        else
          expect(subscriber_.erase(h) == 1, fmt::format("hash {:x} removed but never stored", h));
      }
    }
    const PrefixCache& cache = kv_.pool().cache();
    std::set<std::uint64_t> truth;
    for (BlockId b = 0; b < kv_.pool().num_blocks(); ++b)
      if (cache.is_cached(b)) truth.insert(external_hash(cache.hash_of(b)));
    expect(truth == subscriber_, fmt::format("KV events replayed give {} hashes, the cache holds {}",
                                             subscriber_.size(), truth.size()));
    expect(static_cast<int>(truth.size()) == cache.num_cached_hashes(), "distinct cached hash count drifted");
  }

  void expect(bool ok, const std::string& what) {
    if (!ok && error_.empty()) error_ = what;
  }

  // Fills r.prefix for the tokens that have none yet.
  void intern_prefix(Request& r) {
    auto [root_it, added] = roots_.emplace(r.salt, static_cast<std::int64_t>(roots_.size()));
    for (std::size_t p = r.prefix.size(); p < r.tokens.size(); ++p) {
      // A first token's parent is its salt's root, encoded below zero.
      const std::int64_t parent = p == 0 ? -1 - root_it->second : r.prefix[p - 1];
      auto [it, inserted] = trie_.emplace(std::make_pair(parent, r.tokens[p]), static_cast<std::int64_t>(nodes_.size()));
      if (inserted) nodes_.push_back({p == 0 ? -1 : parent, r.tokens[p]});
      r.prefix.push_back(it->second);
    }
  }

  // The model runner writes the next n tokens' KV into their slots; only a
  // block that no one else references may be written.
  void write(SequenceId id, Request& r, int n) {
    const BlockTable& table = kv_.block_table(id);
    const BlockPool& pool = kv_.pool();
    for (int p = r.num_written; p < r.num_written + n; ++p) {
      const SlotId slot = table.slot(p);
      const BlockId b = static_cast<BlockId>(slot / block_size_);
      expect(pool.ref_count(b) == 1, fmt::format("request {} writes block {} with ref count {}", id, b, pool.ref_count(b)));
      expect(!pool.cache().is_cached(b), fmt::format("request {} writes cached block {}", id, b));
      slots_[static_cast<std::size_t>(slot)] = r.prefix[static_cast<std::size_t>(p)];
    }
    std::vector<SlotId> mapping;
    kv_.slot_mapping(id, r.num_written, r.num_written + n, mapping);
    for (int i = 0; i < n; ++i)
      expect(mapping[static_cast<std::size_t>(i)] == table.slot(r.num_written + i), "slot_mapping disagrees with the table");
    r.num_written += n;
  }

  void commit(SequenceId id, int num_verified) {
    Request& r = requests_.at(id);
    kv_.commit(id, std::span<const TokenId>(r.tokens.data(), static_cast<std::size_t>(num_verified)));
    for (int p = r.num_verified; p < num_verified; ++p) verified_.insert(r.prefix[static_cast<std::size_t>(p)]);
    r.num_verified = num_verified;
  }

  KvCacheManager kv_;
  int block_size_;
  std::vector<std::int64_t> slots_;  // [num_blocks * block_size]: prefix node whose KV a slot holds, -1: none
  std::map<SequenceId, Request> requests_;
  std::map<std::string, std::int64_t> roots_;
  std::map<std::pair<std::int64_t, TokenId>, std::int64_t> trie_;
  std::vector<Node> nodes_;
  std::set<std::int64_t> verified_;
  std::set<std::uint64_t> subscriber_;  // the hashes KV events have announced
  std::string error_;
};

}  // namespace folio::testing
