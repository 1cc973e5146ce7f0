#include "server/events/kv_event_encoding.h"

#include "server/events/msgpack_writer.h"

namespace folio::server {
namespace {

void write_hashes(MsgpackWriter& w, const std::vector<std::uint64_t>& hashes) {
  w.array(hashes.size());
  for (std::uint64_t h : hashes) w.uint(h);
}

void write_event(MsgpackWriter& w, const KvEvent& e) {
  switch (e.kind) {
    case KvEvent::Kind::kStored:
      w.array(8);
      w.str("BlockStored");
      write_hashes(w, e.block_hashes);
      if (e.parent_block_hash)
        w.uint(*e.parent_block_hash);
      else
        w.nil();
      w.array(e.token_ids.size());
      for (TokenId t : e.token_ids) w.integer(t);
      w.integer(e.block_size);
      w.nil();  // lora_id: folio serves no adapters
      w.str(kKvEventMedium);
      w.nil();  // lora_name
      return;
    case KvEvent::Kind::kRemoved:
      w.array(3);
      w.str("BlockRemoved");
      write_hashes(w, e.block_hashes);
      w.str(kKvEventMedium);
      return;
    case KvEvent::Kind::kAllCleared:
      w.array(1);
      w.str("AllBlocksCleared");
      return;
  }
}

}  // namespace

std::string encode_kv_event_batch(double ts_s, std::span<const KvEvent> events, int data_parallel_rank) {
  MsgpackWriter w;
  w.array(3);
  w.float64(ts_s);
  w.array(events.size());
  for (const KvEvent& e : events) write_event(w, e);
  w.integer(data_parallel_rank);
  return w.take();
}

}  // namespace folio::server
