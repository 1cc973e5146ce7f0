// The Responses API's store: bounded by a count and by bytes, oldest out
// first, and an evicted id told apart from one never stored.
#include "server/api/response_store.h"

#include <gtest/gtest.h>

namespace folio::server {
namespace {

StoredResponse stored(const std::string& text) {
  StoredResponse s;
  s.response = Json{{"id", "r"}, {"text", text}};
  s.conversation.push_back({"user", text});
  return s;
}

TEST(ResponseStoreTest, KeepsTheNewestWithinItsCount) {
  ResponseStore store(2, 1 << 20);
  store.put("a", stored("1"));
  store.put("b", stored("2"));
  store.put("c", stored("3"));
  ResponseStore::Lookup why = ResponseStore::Lookup::kFound;
  EXPECT_EQ(store.find("a", &why), nullptr);
  EXPECT_EQ(why, ResponseStore::Lookup::kEvicted);
  EXPECT_EQ(store.find("zzz", &why), nullptr);
  EXPECT_EQ(why, ResponseStore::Lookup::kUnknown);
  ASSERT_NE(store.find("b", &why), nullptr);
  EXPECT_EQ(why, ResponseStore::Lookup::kFound);
  EXPECT_EQ(store.find("c")->conversation[0].content, "3");
  EXPECT_EQ(store.num_responses(), 2u);
}

TEST(ResponseStoreTest, KeepsItsBytesWithinBound) {
  const std::size_t one = ResponseStore::bytes_of(stored(std::string(100, 'x')));
  ResponseStore store(100, 2 * one + one / 2);
  store.put("a", stored(std::string(100, 'x')));
  store.put("b", stored(std::string(100, 'y')));
  store.put("c", stored(std::string(100, 'z')));
  EXPECT_EQ(store.find("a"), nullptr);
  EXPECT_NE(store.find("b"), nullptr);
  EXPECT_NE(store.find("c"), nullptr);
  EXPECT_EQ(store.num_bytes(), 2 * one);
  // Larger than the whole bound: not kept, and said evicted, not unknown.
  EXPECT_FALSE(store.put("huge", stored(std::string(10 * one, 'h'))));
  ResponseStore::Lookup why = ResponseStore::Lookup::kFound;
  EXPECT_EQ(store.find("huge", &why), nullptr);
  EXPECT_EQ(why, ResponseStore::Lookup::kEvicted);
  EXPECT_NE(store.find("c"), nullptr);
}

TEST(ResponseStoreTest, ErasedIsGoneAndFreesItsRoom) {
  ResponseStore store(2, 1 << 20);
  store.put("a", stored("1"));
  store.put("b", stored("2"));
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
  store.put("c", stored("3"));
  EXPECT_NE(store.find("b"), nullptr);  // the erased one made the room
  EXPECT_NE(store.find("c"), nullptr);
  EXPECT_TRUE(store.erase("b"));
  for (int i = 0; i < 1000; ++i) {  // each erased one gives its room back: c is never evicted
    store.put("x" + std::to_string(i), stored("x"));
    store.erase("x" + std::to_string(i));
  }
  EXPECT_NE(store.find("c"), nullptr);
  EXPECT_EQ(store.num_responses(), 1u);
  EXPECT_EQ(store.num_bytes(), ResponseStore::bytes_of(stored("3")));
  ResponseStore none(0, 1 << 20);
  EXPECT_FALSE(none.put("a", stored("1")));
  EXPECT_EQ(none.find("a"), nullptr);
}

}  // namespace
}  // namespace folio::server
