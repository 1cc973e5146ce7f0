// KvEvent: one change to the set of block hashes the prefix cache holds, in
// the terms a prefix-aware router reads (vLLM's BlockStored, BlockRemoved,
// AllBlocksCleared). Invariant of a KvEventLog: replaying its events from the
// start gives exactly the distinct hashes the cache holds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kv/block_hash.h"
#include "kv/kv_types.h"

namespace folio {

struct KvEvent {
  enum class Kind { kStored, kRemoved, kAllCleared };
  Kind kind = Kind::kStored;
  // kStored: a chain of blocks, each the parent of the next; kRemoved: any
  // hashes. The low 64 bits of folio's hash, the integer form vLLM sends.
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::uint64_t> parent_block_hash;  // kStored: the block before the first; none for a prompt's first
  std::vector<TokenId> token_ids;                  // kStored: [block_hashes.size() * block_size]
  int block_size = 0;
};

// The external (router-facing) form of a block hash.
inline std::uint64_t external_hash(const BlockHash& h) { return h.lo; }

// Events in the order they happened; a block stored right after its parent
// joins its parent's event, as vLLM batches a request's new blocks.
class KvEventLog {
 public:
  void stored(const BlockHash& hash, std::optional<BlockHash> parent, std::span<const TokenId> tokens) {
    const std::uint64_t h = external_hash(hash);
    if (!events_.empty()) {
      KvEvent& last = events_.back();
      if (last.kind == KvEvent::Kind::kStored && parent && last.block_hashes.back() == external_hash(*parent) &&
          last.block_size == static_cast<int>(tokens.size())) {
        last.block_hashes.push_back(h);
        last.token_ids.insert(last.token_ids.end(), tokens.begin(), tokens.end());
        return;
      }
    }
    KvEvent e;
    e.kind = KvEvent::Kind::kStored;
    e.block_hashes.push_back(h);
    if (parent) e.parent_block_hash = external_hash(*parent);
    e.token_ids.assign(tokens.begin(), tokens.end());
    e.block_size = static_cast<int>(tokens.size());
    events_.push_back(std::move(e));
  }

  void removed(const BlockHash& hash) {
    if (!events_.empty() && events_.back().kind == KvEvent::Kind::kRemoved) {
      events_.back().block_hashes.push_back(external_hash(hash));
      return;
    }
    KvEvent e;
    e.kind = KvEvent::Kind::kRemoved;
    e.block_hashes.push_back(external_hash(hash));
    events_.push_back(std::move(e));
  }

  bool empty() const { return events_.empty(); }
  std::vector<KvEvent> take() { return std::exchange(events_, {}); }

 private:
  std::vector<KvEvent> events_;
};

}  // namespace folio
