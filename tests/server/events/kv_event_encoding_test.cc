// MsgpackWriter's shortest forms at each size boundary, and a KV event batch
// in vLLM's array layout, byte for byte (tests/python/test_kv_events.py
// decodes the same from a live server with Python's msgpack).
#include "server/events/kv_event_encoding.h"

#include <gtest/gtest.h>

#include <string>

#include "server/events/msgpack_writer.h"

namespace folio::server {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

template <typename F>
std::string written(F f) {
  MsgpackWriter w;
  f(w);
  return hex(w.take());
}

TEST(MsgpackWriter, UsesTheShortestForm) {
  EXPECT_EQ(written([](auto& w) { w.nil(); }), "c0");
  EXPECT_EQ(written([](auto& w) { w.boolean(true); }), "c3");
  EXPECT_EQ(written([](auto& w) { w.uint(127); }), "7f");
  EXPECT_EQ(written([](auto& w) { w.uint(128); }), "cc80");
  EXPECT_EQ(written([](auto& w) { w.uint(65535); }), "cdffff");
  EXPECT_EQ(written([](auto& w) { w.uint(65536); }), "ce00010000");
  EXPECT_EQ(written([](auto& w) { w.uint(0xFFFFFFFFFFFFFFFFull); }), "cfffffffffffffffff");
  EXPECT_EQ(written([](auto& w) { w.integer(-1); }), "ff");
  EXPECT_EQ(written([](auto& w) { w.integer(-32); }), "e0");
  EXPECT_EQ(written([](auto& w) { w.integer(-33); }), "d0df");
  EXPECT_EQ(written([](auto& w) { w.integer(-129); }), "d1ff7f");
  EXPECT_EQ(written([](auto& w) { w.integer(-40000); }), "d2ffff63c0");
  EXPECT_EQ(written([](auto& w) { w.float64(1.5); }), "cb3ff8000000000000");
  EXPECT_EQ(written([](auto& w) { w.str("GPU"); }), "a3475055");
  EXPECT_EQ(written([](auto& w) { w.str(std::string(32, 'a')); }), "d920" + hex(std::string(32, 'a')));
  EXPECT_EQ(written([](auto& w) { w.array(15); }), "9f");
  EXPECT_EQ(written([](auto& w) { w.array(16); }), "dc0010");
  EXPECT_EQ(written([](auto& w) { w.array(70000); }), "dd00011170");
}

TEST(KvEventEncoding, WritesVllmsArrayLayout) {
  KvEvent stored;
  stored.kind = KvEvent::Kind::kStored;
  stored.block_hashes = {1, 0x1234};
  stored.parent_block_hash = std::nullopt;
  stored.token_ids = {5, 6, 7, 300};
  stored.block_size = 2;
  KvEvent removed;
  removed.kind = KvEvent::Kind::kRemoved;
  removed.block_hashes = {9};
  KvEvent cleared;
  cleared.kind = KvEvent::Kind::kAllCleared;
  const std::vector<KvEvent> events = {stored, removed, cleared};
  const std::string bytes = hex(encode_kv_event_batch(1.5, events, 0));
  const std::string want = "93"                  // [ts, events, data_parallel_rank]
                           "cb3ff8000000000000"  // 1.5
                           "93"                  // three events
                           "98"                  // BlockStored: 8 fields
                           "ab" + hex("BlockStored") +
                           "9201cd1234"          // block_hashes [1, 0x1234]
                           "c0"                  // parent_block_hash: none
                           "94050607cd012c"      // token_ids [5, 6, 7, 300]
                           "02"                  // block_size
                           "c0"                  // lora_id
                           "a3475055"            // medium "GPU"
                           "c0"                  // lora_name
                           "93"                  // BlockRemoved
                           "ac" + hex("BlockRemoved") +
                           "9109"                // [9]
                           "a3475055"            // "GPU"
                           "91"                  // AllBlocksCleared
                           "b0" + hex("AllBlocksCleared") +
                           "00";                 // data_parallel_rank 0
  EXPECT_EQ(bytes, want);
}

}  // namespace
}  // namespace folio::server
