// FreeBlockQueue: the blocks with no reference, in eviction order (head
// first). An intrusive doubly linked list over block ids, so a block is
// removed from the middle (a prefix hit reviving it) in O(1).
#pragma once

#include <vector>

#include "kv/kv_types.h"

namespace folio {

class FreeBlockQueue {
 public:
  // Starts holding every block, block 0 at the head.
  explicit FreeBlockQueue(int num_blocks);

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(BlockId block) const { return in_queue_[index(block)] != 0; }

  BlockId front() const;  // the next block to hand out; the queue must not be empty
  BlockId pop_front();
  void push_front(BlockId block);
  void push_back(BlockId block);
  void remove(BlockId block);  // anywhere in the queue

  // Head to tail; for tests and debugging (O(size)).
  std::vector<BlockId> to_vector() const;

 private:
  int index(BlockId block) const;
  void link_after(int at, BlockId block);

  // Index num_blocks_ is the sentinel: next_[sentinel] is the head,
  // prev_[sentinel] the tail.
  int num_blocks_;
  int sentinel_;
  std::vector<BlockId> prev_;
  std::vector<BlockId> next_;
  std::vector<unsigned char> in_queue_;
  int size_ = 0;
};

}  // namespace folio
