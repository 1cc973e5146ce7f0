// BlockTable: the blocks that hold one sequence's KV, in token order. Token
// position p lives in slot block_table[p / block_size] * block_size +
// p % block_size; the table always covers the sequence's tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"

namespace folio {

class BlockTable {
 public:
  explicit BlockTable(int block_size = kDefaultBlockSize);

  int block_size() const { return block_size_; }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  bool empty() const { return blocks_.empty(); }
  std::int64_t num_slots() const { return static_cast<std::int64_t>(blocks_.size()) * block_size_; }
  const std::vector<BlockId>& blocks() const { return blocks_; }
  BlockId operator[](int i) const { return blocks_[static_cast<std::size_t>(i)]; }
  BlockId back() const { return blocks_.back(); }

  void append(BlockId block) { blocks_.push_back(block); }
  void append(std::span<const BlockId> blocks) { blocks_.insert(blocks_.end(), blocks.begin(), blocks.end()); }
  BlockId pop_back();

  // The slot of token position `position`, which the table must cover.
  SlotId slot(std::int64_t position) const;
  // Appends the slots of positions [begin, end) to `out`.
  void slot_mapping(std::int64_t begin, std::int64_t end, std::vector<SlotId>& out) const;

  // Blocks needed to hold num_tokens tokens.
  static int blocks_for(std::int64_t num_tokens, int block_size);

 private:
  int block_size_;
  std::vector<BlockId> blocks_;
};

}  // namespace folio
