#include "kv/block_table.h"

#include "core/error.h"

namespace folio {

BlockTable::BlockTable(int block_size) : block_size_(block_size) { FOLIO_CHECK(block_size > 0); }

BlockId BlockTable::pop_back() {
  FOLIO_CHECK(!blocks_.empty());
  const BlockId b = blocks_.back();
  blocks_.pop_back();
  return b;
}

SlotId BlockTable::slot(std::int64_t position) const {
  FOLIO_CHECK(position >= 0 && position < num_slots());
  const BlockId b = blocks_[static_cast<std::size_t>(position / block_size_)];
  return static_cast<SlotId>(b) * block_size_ + position % block_size_;
}

void BlockTable::slot_mapping(std::int64_t begin, std::int64_t end, std::vector<SlotId>& out) const {
  FOLIO_CHECK(begin >= 0 && begin <= end && end <= num_slots());
  out.reserve(out.size() + static_cast<std::size_t>(end - begin));
  for (std::int64_t p = begin; p < end; ++p) out.push_back(slot(p));
}

int BlockTable::blocks_for(std::int64_t num_tokens, int block_size) {
  FOLIO_CHECK(num_tokens >= 0 && block_size > 0);
  return static_cast<int>((num_tokens + block_size - 1) / block_size);
}

}  // namespace folio
