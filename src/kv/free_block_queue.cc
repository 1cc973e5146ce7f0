#include "kv/free_block_queue.h"

#include "core/error.h"

namespace folio {

FreeBlockQueue::FreeBlockQueue(int num_blocks)
    : num_blocks_(num_blocks),
      sentinel_(num_blocks),
      prev_(static_cast<std::size_t>(num_blocks) + 1),
      next_(static_cast<std::size_t>(num_blocks) + 1),
      in_queue_(static_cast<std::size_t>(num_blocks), 0) {
  FOLIO_CHECK(num_blocks >= 0);
  prev_[sentinel_] = sentinel_;
  next_[sentinel_] = sentinel_;
  for (BlockId b = 0; b < num_blocks; ++b) push_back(b);
}

int FreeBlockQueue::index(BlockId block) const {
  FOLIO_CHECK(block >= 0 && block < num_blocks_);
  return block;
}

BlockId FreeBlockQueue::front() const {
  FOLIO_CHECK(size_ > 0);
  return next_[sentinel_];
}

void FreeBlockQueue::link_after(int at, BlockId block) {
  FOLIO_CHECK(!in_queue_[index(block)]);
  const int after = next_[at];
  prev_[block] = at;
  next_[block] = after;
  next_[at] = block;
  prev_[after] = block;
  in_queue_[block] = 1;
  ++size_;
}

void FreeBlockQueue::push_front(BlockId block) { link_after(sentinel_, block); }

void FreeBlockQueue::push_back(BlockId block) { link_after(prev_[sentinel_], block); }

void FreeBlockQueue::remove(BlockId block) {
  FOLIO_CHECK(in_queue_[index(block)]);
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  in_queue_[block] = 0;
  --size_;
}

BlockId FreeBlockQueue::pop_front() {
  const BlockId block = front();
  remove(block);
  return block;
}

std::vector<BlockId> FreeBlockQueue::to_vector() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<std::size_t>(size_));
  for (int at = next_[sentinel_]; at != sentinel_; at = next_[at]) out.push_back(at);
  return out;
}

}  // namespace folio
