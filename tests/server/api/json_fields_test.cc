// Request JSON: numbers beyond the types they must fit are refused (never
// wrapped, never a 500), hostile shapes are refused before they are built,
// repeated keys are refused, and many keys cost linear time.
#include "server/api/json_fields.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "server/api/api_error.h"

namespace folio::server {
namespace {

int status_of(const std::string& body) {
  try {
    parse_json_object(body);
    return 200;
  } catch (const ApiError& e) {
    return e.status();
  }
}

TEST(JsonFieldsTest, BadBodiesAre400) {
  EXPECT_EQ(status_of(R"({"t": 1e999})"), 400);  // beyond a double: nlohmann's out_of_range
  EXPECT_EQ(status_of(R"({"t": -1e999})"), 400);
  EXPECT_EQ(status_of("{\"t\": \"\xff\"}"), 400);  // not UTF-8
  EXPECT_EQ(status_of("[1]"), 400);
  EXPECT_EQ(status_of(""), 400);
  EXPECT_EQ(status_of(std::string(65, '[') + std::string(65, ']')), 400);
  EXPECT_EQ(status_of(std::string(64, '[') + std::string(64, ']')), 400);  // deep enough, but not an object
  EXPECT_EQ(status_of(R"({"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})"), 200);
  std::string wide = "{\"a\": [";
  for (int i = 0; i <= kMaxJsonValues; ++i) wide += "0,";
  wide += "0]}";
  EXPECT_EQ(status_of(wide), 400);
}

TEST(JsonFieldsTest, IntegersNeverWrap) {
  const Json body = parse_json_object(R"({"k": 18446744073709551615, "m": 9223372036854775807, "f": 5.0, "n": -3})");
  EXPECT_EQ(as_int64(body["k"]), std::nullopt);
  EXPECT_EQ(as_int64(body["m"]), INT64_MAX);
  EXPECT_EQ(as_int64(body["f"]), std::nullopt);
  EXPECT_EQ(as_int64(body["n"]), -3);
  EXPECT_THROW(get_int(body, "k", -1, 1 << 30), ApiError);  // top_k = 2^64-1 is not top_k = -1
  EXPECT_THROW(get_int(body, "m", -1, 1 << 30), ApiError);
  EXPECT_THROW(get_int(body, "f", -1, 1 << 30), ApiError);
  EXPECT_EQ(get_int(body, "n", -5, 5), -3);
  EXPECT_EQ(get_int(body, "absent", 0, 1), std::nullopt);
}

TEST(JsonFieldsTest, RepeatedKeysAre400) {
  EXPECT_EQ(status_of(R"({"a": 1, "a": 2})"), 400);  // which one was meant cannot be known
  EXPECT_EQ(status_of(R"({"t": [{"x": 1, "y": {"z": 1, "z": 1}}]})"), 400);
  EXPECT_EQ(status_of(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]})"), 200);  // same key in different objects
  EXPECT_EQ(parse_json(R"({"k": 1, "k": 1})"), std::nullopt);
}

TEST(JsonFieldsTest, KeysKeepTheirWrittenOrder) {
  const Json body = parse_json_object(R"({"z": 1, "a": {"y": [1, {"q": 0, "b": 1}], "c": null}, "m": "s"})");
  EXPECT_EQ(dump_json(body), R"({"z":1,"a":{"y":[1,{"q":0,"b":1}],"c":null},"m":"s"})");
}

TEST(JsonFieldsTest, ManyKeysParseInLinearTime) {
  std::string body = "{";
  for (int i = 0; i < 100000; ++i) body += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  body += "\"prompt\": \"hi\"}";
  const auto start = std::chrono::steady_clock::now();
  const Json json = parse_json_object(body);
  // A reader looks up a fixed number of names per object, each a linear scan.
  for (int i = 0; i < 64; ++i) ASSERT_EQ(field_of(json, "absent"), nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 2.0);  // an insertion-ordered object parsed by inserting takes minutes for this
  EXPECT_EQ(get_string(json, "prompt"), "hi");
  EXPECT_EQ(json.size(), 100001u);
}

}  // namespace
}  // namespace folio::server
