// GgufWriter round trips through GgufFile: every value type, nested and empty
// arrays, every tensor type at alignments 1, 32 and 64, streaming in pieces,
// and the misuse the writer must refuse.
#include "model/gguf_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/mapped_file.h"
#include "model/gguf_file.h"
#include "support/temp_path.h"
#include "support/test_models.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using folio::testing::TempPath;

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + seed * 17 + (i >> 8));
  return v;
}

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes a file with metadata only.
GgufFile write_metadata(GgufWriter& w, const TempPath& path) {
  w.begin(path.str());
  w.finish();
  return GgufFile::open(path.str());
}

TEST(GgufWriter, EveryScalarTypeRoundTrips) {
  TempPath path;
  GgufWriter w;
  w.set("u8", GgufMetaValue::u8(255));
  w.set("i8", GgufMetaValue::i8(-128));
  w.set("u16", GgufMetaValue::u16(65535));
  w.set("i16", GgufMetaValue::i16(-32768));
  w.set("u32", GgufMetaValue::u32(4294967295u));
  w.set("i32", GgufMetaValue::i32(std::numeric_limits<std::int32_t>::min()));
  w.set("f32", GgufMetaValue::f32(-1.5e-7f));
  w.set("true", GgufMetaValue::boolean(true));
  w.set("false", GgufMetaValue::boolean(false));
  w.set("string", GgufMetaValue::string("h\xc3\xa9llo\nw\0rld"));
  w.set("string.with_nul", GgufMetaValue::string(std::string("a\0b", 3)));
  w.set("string.empty", GgufMetaValue::string(""));
  w.set("u64", GgufMetaValue::u64(std::numeric_limits<std::uint64_t>::max()));
  w.set("i64", GgufMetaValue::i64(std::numeric_limits<std::int64_t>::min()));
  w.set("f64", GgufMetaValue::f64(3.141592653589793));
  w.set("f32.inf", GgufMetaValue::f32(-std::numeric_limits<float>::infinity()));
  GgufFile f = write_metadata(w, path);

  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 16u);
  EXPECT_EQ(f.metadata()[0].first, "u8");
  EXPECT_EQ(f.metadata()[15].first, "f32.inf");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.get("u8").type(), GgufType::kU8);
  EXPECT_EQ(f.get_int("u8", 0), 255);
  EXPECT_EQ(f.get_int("i8", 0), -128);
  EXPECT_EQ(f.get_int("u16", 0), 65535);
  EXPECT_EQ(f.get_int("i16", 0), -32768);
  EXPECT_EQ(f.get("u32").as_uint("u32"), 4294967295u);
  EXPECT_EQ(f.get_int("i32", 0), std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(f.get_float("f32", 0), static_cast<double>(-1.5e-7f));
  EXPECT_TRUE(f.get_bool("true", false));
  EXPECT_FALSE(f.get_bool("false", true));
  EXPECT_EQ(f.get_string("string", ""), "h\xc3\xa9llo\nw");  // the literal stops at its \0
  EXPECT_EQ(f.get("string.with_nul").as_string("s"), std::string_view("a\0b", 3));
  EXPECT_EQ(f.get_string("string.empty", "absent"), "");
  EXPECT_EQ(f.get("u64").as_uint("u64"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(f.get_float("u64", 0), 18446744073709551616.0);
  EXPECT_EQ(f.get_int("i64", 0), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(f.get_float("f64", 0), 3.141592653589793);
  EXPECT_EQ(f.get_float("f32.inf", 0), -std::numeric_limits<double>::infinity());
  // Types the value does not have are refused with the key named.
  EXPECT_THAT([&] { f.get_int("u64", 0); }, ::testing::ThrowsMessage<Error>(HasSubstr("u64")));
  EXPECT_THAT([&] { f.get("i8").as_uint("i8"); }, ::testing::ThrowsMessage<Error>(HasSubstr("i8 is -128")));
  EXPECT_THAT([&] { f.get_string("u8", ""); }, ::testing::ThrowsMessage<Error>(HasSubstr("u8 has type u8")));
  EXPECT_THROW(f.get_bool("u8", false), Error);
  EXPECT_THROW(f.get_int("f32", 0), Error);
  EXPECT_THROW(f.get("u8").ints("u8"), Error);
  EXPECT_EQ(f.get("i16").to_string(), "-32768");
  EXPECT_EQ(f.get("u64").to_string(), "18446744073709551615");
  EXPECT_EQ(f.get("true").to_string(), "true");
  EXPECT_EQ(f.get("string.empty").to_string(), "\"\"");
}

TEST(GgufWriter, ArraysOfEveryTypeRoundTrip) {
  TempPath path;
  const std::uint8_t u8s[] = {0, 1, 255};
  const std::int8_t i8s[] = {-128, 0, 127};
  const std::uint16_t u16s[] = {0, 65535};
  const std::int16_t i16s[] = {-32768, 32767};
  const std::uint32_t u32s[] = {7, 4294967295u};
  const std::int32_t i32s[] = {-5, 6, std::numeric_limits<std::int32_t>::min()};
  const float f32s[] = {0.5f, -2.0f};
  const bool bools[] = {true, false, true};
  const std::uint64_t u64s[] = {1, std::numeric_limits<std::uint64_t>::max()};
  const std::int64_t i64s[] = {std::numeric_limits<std::int64_t>::min(), -1, std::numeric_limits<std::int64_t>::max()};
  const double f64s[] = {1e300, -0.25};
  GgufWriter w;
  w.set("u8", GgufMetaValue::array_of<std::uint8_t>(u8s));
  w.set("i8", GgufMetaValue::array_of<std::int8_t>(i8s));
  w.set("u16", GgufMetaValue::array_of<std::uint16_t>(u16s));
  w.set("i16", GgufMetaValue::array_of<std::int16_t>(i16s));
  w.set("u32", GgufMetaValue::array_of<std::uint32_t>(u32s));
  w.set("i32", GgufMetaValue::array_of<std::int32_t>(i32s));
  w.set("f32", GgufMetaValue::array_of<float>(f32s));
  w.set("bool", GgufMetaValue::array_of<bool>(bools));
  w.set("u64", GgufMetaValue::array_of<std::uint64_t>(u64s));
  w.set("i64", GgufMetaValue::array_of<std::int64_t>(i64s));
  w.set("f64", GgufMetaValue::array_of<double>(f64s));
  w.set("strings", GgufMetaValue::strings({"alpha", "", "\xe2\x96\x81gamma"}));
  // The generic form: one value per element.
  w.set("i16.generic", GgufMetaValue::array(GgufType::kI16, {GgufMetaValue::i16(-3), GgufMetaValue::i16(4)}));
  w.set("strings.generic",
        GgufMetaValue::array(GgufType::kString, {GgufMetaValue::string("x"), GgufMetaValue::string("yz")}));
  GgufFile f = write_metadata(w, path);

  EXPECT_THAT(f.get("u8").ints("u8"), ElementsAre(0, 1, 255));
  EXPECT_THAT(f.get("i8").ints("i8"), ElementsAre(-128, 0, 127));
  EXPECT_THAT(f.get("u16").ints("u16"), ElementsAre(0, 65535));
  EXPECT_THAT(f.get("i16").ints("i16"), ElementsAre(-32768, 32767));
  EXPECT_THAT(f.get("u32").ints("u32"), ElementsAre(7, 4294967295LL));
  EXPECT_THAT(f.get("i32").ints("i32"), ElementsAre(-5, 6, std::numeric_limits<std::int32_t>::min()));
  EXPECT_THAT(f.get("f32").floats("f32"), ElementsAre(0.5f, -2.0f));
  EXPECT_THAT(f.get("bool").ints("bool"), ElementsAre(1, 0, 1));
  EXPECT_EQ(f.get("bool").element_type(), GgufType::kBool);
  // u64 elements beyond int64 are refused by ints(), but their bytes are there.
  EXPECT_THAT([&] { f.get("u64").ints("u64"); }, ::testing::ThrowsMessage<Error>(HasSubstr("u64 element 1")));
  std::uint64_t last;
  std::memcpy(&last, f.get("u64").raw_bytes().data() + 8, 8);
  EXPECT_EQ(last, std::numeric_limits<std::uint64_t>::max());
  EXPECT_THAT(f.get("i64").ints("i64"), ElementsAre(std::numeric_limits<std::int64_t>::min(), -1,
                                                   std::numeric_limits<std::int64_t>::max()));
  EXPECT_THAT(f.get("f64").floats("f64"), ElementsAre(std::numeric_limits<float>::infinity(), -0.25f));
  EXPECT_THAT(f.get("strings").strings("strings"), ElementsAre("alpha", "", "\xe2\x96\x81gamma"));
  EXPECT_THAT(f.get("i16.generic").ints("k"), ElementsAre(-3, 4));
  EXPECT_THAT(f.get("strings.generic").strings("k"), ElementsAre("x", "yz"));
  EXPECT_EQ(f.get("i32").size(), 3u);
  EXPECT_EQ(f.get("i32").raw_bytes().size(), 12u);
  EXPECT_EQ(f.get("strings").raw_bytes().size(), 0u);
  EXPECT_EQ(f.get("i8").to_string(), "[-128, 0, 127]");
  EXPECT_EQ(f.get("strings").to_string(), "[\"alpha\", \"\", \"\xe2\x96\x81gamma\"]");
  EXPECT_EQ(f.get("u8").to_string(2), "[0, 1, ... (3 items)]");
  EXPECT_THROW(f.get("strings").ints("strings"), Error);
  EXPECT_THROW(f.get("i32").floats("i32"), Error);
  EXPECT_THROW(f.get("f32").strings("f32"), Error);
  EXPECT_THROW(f.get("f32").items("f32"), Error);
}

TEST(GgufWriter, EmptyArraysOfEveryTypeRoundTrip) {
  TempPath path;
  GgufWriter w;
  for (std::uint32_t id = 0; id <= 12; ++id) {
    auto t = static_cast<GgufType>(id);
    w.set(fmt::format("empty.{}", gguf_type_name(t)), GgufMetaValue::array(t, {}));
  }
  GgufFile f = write_metadata(w, path);
  ASSERT_EQ(f.metadata().size(), 13u);
  for (std::uint32_t id = 0; id <= 12; ++id) {
    auto t = static_cast<GgufType>(id);
    const GgufValue& v = f.get(fmt::format("empty.{}", gguf_type_name(t)));
    EXPECT_EQ(v.type(), GgufType::kArray);
    EXPECT_EQ(v.element_type(), t);
    EXPECT_EQ(v.size(), 0u);
    EXPECT_EQ(v.to_string(), "[]");
  }
  EXPECT_TRUE(f.get("empty.i32").ints("k").empty());
  EXPECT_TRUE(f.get("empty.f64").floats("k").empty());
  EXPECT_TRUE(f.get("empty.string").strings("k").empty());
  EXPECT_TRUE(f.get("empty.array").items("k").empty());
}

TEST(GgufWriter, NestedArraysRoundTrip) {
  TempPath path;
  const std::int32_t ints[] = {1, -2, 3};
  // [[1, -2, 3], ["a", "b"], [], [[true]]]: each inner array has its own element type.
  auto inner_bool = GgufMetaValue::array(GgufType::kBool, {GgufMetaValue::boolean(true)});
  auto mixed = GgufMetaValue::array(
      GgufType::kArray, {GgufMetaValue::array_of<std::int32_t>(ints), GgufMetaValue::strings({"a", "b"}),
                         GgufMetaValue::array(GgufType::kF64, {}),
                         GgufMetaValue::array(GgufType::kArray, {std::move(inner_bool)})});
  // The deepest nesting a reader accepts: 8 levels.
  GgufMetaValue deep = GgufMetaValue::array(GgufType::kU16, {GgufMetaValue::u16(42)});
  for (int level = 1; level < kGgufMaxArrayDepth; ++level) deep = GgufMetaValue::array(GgufType::kArray, {deep});
  GgufWriter w;
  w.set("mixed", mixed);
  w.set("deep", deep);
  w.set("after", GgufMetaValue::u32(9));  // parsing resumes at the right byte after nested arrays
  GgufFile f = write_metadata(w, path);

  const auto& items = f.get("mixed").items("mixed");
  ASSERT_EQ(items.size(), 4u);
  EXPECT_THAT(items[0].ints("mixed[0]"), ElementsAre(1, -2, 3));
  EXPECT_THAT(items[1].strings("mixed[1]"), ElementsAre("a", "b"));
  EXPECT_EQ(items[2].element_type(), GgufType::kF64);
  EXPECT_EQ(items[2].size(), 0u);
  ASSERT_EQ(items[3].items("mixed[3]").size(), 1u);
  EXPECT_THAT(items[3].items("mixed[3]")[0].ints("mixed[3][0]"), ElementsAre(1));
  EXPECT_EQ(f.get("mixed").to_string(), "[[1, -2, 3], [\"a\", \"b\"], [], [[true]]]");

  const GgufValue* v = &f.get("deep");
  for (int level = 1; level < kGgufMaxArrayDepth; ++level) {
    ASSERT_EQ(v->items("deep").size(), 1u);
    v = &v->items("deep")[0];
  }
  EXPECT_THAT(v->ints("deep"), ElementsAre(42));
  EXPECT_EQ(f.get_int("after", 0), 9);

  // One level more is refused by the writer, as the reader would refuse it.
  EXPECT_THAT([&] { GgufMetaValue::array(GgufType::kArray, {deep}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("nested 9 deep")));
}

TEST(GgufWriter, ArrayElementsMustMatchTheArrayType) {
  EXPECT_THAT([] { GgufMetaValue::array(GgufType::kU32, {GgufMetaValue::u32(1), GgufMetaValue::i32(2)}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("element 1 of type i32")));
  EXPECT_THROW(GgufMetaValue::array(static_cast<GgufType>(13), {}), Error);
}

TEST(GgufWriter, SettingAKeyAgainReplacesItsValueInPlace) {
  TempPath path;
  GgufWriter w;
  w.set("a", GgufMetaValue::u32(1));
  w.set("b", GgufMetaValue::string("x"));
  w.set("a", GgufMetaValue::string("now a string"));
  GgufFile f = write_metadata(w, path);
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[0].first, "a");
  EXPECT_EQ(f.get_string("a", ""), "now a string");
  GgufWriter fresh;
  EXPECT_THAT([&] { fresh.set("", GgufMetaValue::u8(0)); }, ::testing::ThrowsMessage<Error>(HasSubstr("1 to 65535")));
}

// Every tensor type, with two tensors of 3 rows each plus a zero-element one.
class GgufWriterAlignment : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(GgufWriterAlignment, TensorsOfEveryTypeRoundTripAligned) {
  const std::uint32_t alignment = GetParam();
  TempPath path;
  GgufWriter w;
  w.set("general.architecture", GgufMetaValue::string("test"));
  if (alignment != kGgufDefaultAlignment) w.set_alignment(alignment);
  EXPECT_EQ(w.alignment(), alignment);

  struct Expected {
    std::string name;
    DType type;
    std::vector<std::int64_t> shape;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Expected> expected;
  std::uint8_t seed = 0;
  for (std::uint32_t id = 0; id < 64; ++id) {
    auto dt = dtype_info(id);
    if (!dt) continue;
    std::vector<std::int64_t> shape = {dt->block_elems * 2, 3};
    std::string name = fmt::format("t.{}", dt->name);
    std::uint64_t size = w.add_tensor(name, dt->type, shape);
    EXPECT_EQ(size, static_cast<std::uint64_t>(dt->block_bytes * 2 * 3)) << name;
    expected.push_back({name, dt->type, shape, pattern(size, ++seed)});
  }
  ASSERT_EQ(expected.size(), 33u);
  // Zero-element tensors: a zero row length, and zero rows.
  EXPECT_EQ(w.add_tensor("empty.cols", DType::F32, {0}), 0u);
  EXPECT_EQ(w.add_tensor("empty.rows", DType::Q4_K, {256, 0, 7}), 0u);
  // A 4-d tensor whose size is not a multiple of any alignment.
  std::vector<std::uint8_t> odd = pattern(3 * 5 * 7 * 1, 99);
  EXPECT_EQ(w.add_tensor("odd.i8", DType::I8, {3, 5, 7, 1}), odd.size());

  w.begin(path.str());
  EXPECT_EQ(w.data_offset() % alignment, 0u);
  for (const auto& e : expected) w.write_tensor_data(e.name, e.bytes);
  w.write_tensor_data("odd.i8", odd);
  w.finish();

  GgufFile f = GgufFile::open(path.str());
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset(), w.data_offset());
  ASSERT_EQ(f.tensors().size(), expected.size() + 3);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    const Expected& e = expected[i];
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.type, e.type);
    EXPECT_EQ(t.num_dims, 2);
    EXPECT_EQ(t.shape[0], e.shape[0]);
    EXPECT_EQ(t.shape[1], 3);
    EXPECT_EQ(t.rows(), 3);
    EXPECT_EQ(t.num_elements, e.shape[0] * 3);
    EXPECT_EQ(t.file_offset % alignment, 0u) << t.name;
    EXPECT_EQ(t.offset % alignment, 0u) << t.name;
    ASSERT_EQ(t.size_bytes, e.bytes.size());
    EXPECT_EQ(0, std::memcmp(t.data, e.bytes.data(), e.bytes.size())) << t.name;
    EXPECT_EQ(f.find_tensor(e.name), &t);
  }
  const GgufTensorInfo* cols = f.find_tensor("empty.cols");
  ASSERT_NE(cols, nullptr);
  EXPECT_EQ(cols->num_elements, 0);
  EXPECT_EQ(cols->size_bytes, 0u);
  EXPECT_EQ(cols->rows(), 0);
  const GgufTensorInfo* rows = f.find_tensor("empty.rows");
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows->num_dims, 3);
  EXPECT_EQ(rows->shape[2], 7);
  EXPECT_EQ(rows->size_bytes, 0u);
  const GgufTensorInfo* o = f.find_tensor("odd.i8");
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->num_dims, 4);
  EXPECT_EQ(o->shape[3], 1);
  EXPECT_EQ(0, std::memcmp(o->data, odd.data(), odd.size()));
  // Data is padded after every tensor, the last one included.
  EXPECT_EQ(f.file_size() % alignment, 0u);
  EXPECT_EQ(f.file_size(), o->file_offset + (odd.size() + alignment - 1) / alignment * alignment);
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufWriterAlignment, ::testing::Values(1u, 32u, 64u));

TEST(GgufWriter, StreamsATensorInPieces) {
  TempPath path;
  GgufWriter w;
  std::vector<std::uint8_t> a = pattern(4 * 1000, 1), b = pattern(34 * 4, 2);
  w.add_tensor("a", DType::F32, {1000});
  w.add_tensor("b", DType::Q8_0, {128});
  w.begin(path.str());
  w.write_tensor_data("a", std::span(a).subspan(0, 1));
  w.write_tensor_data("a", std::span(a).subspan(1, 2999));
  w.write_tensor_data("a", {});  // empty pieces are allowed anywhere
  w.write_tensor_data("a", std::span(a).subspan(3000));
  w.write_tensor_data("b", b);
  w.finish();
  GgufFile f = GgufFile::open(path.str());
  EXPECT_EQ(0, std::memcmp(f.find_tensor("a")->data, a.data(), a.size()));
  EXPECT_EQ(0, std::memcmp(f.find_tensor("b")->data, b.data(), b.size()));
  EXPECT_FALSE(std::filesystem::exists(path.str() + ".part"));
}

TEST(GgufWriter, RefusesBadTensorDeclarations) {
  GgufWriter w;
  w.add_tensor("x", DType::F32, {4});
  auto refuses = [&](std::string name, DType type, std::vector<std::int64_t> shape, const char* why) {
    EXPECT_THAT([&] { w.add_tensor(name, type, shape); }, ::testing::ThrowsMessage<Error>(HasSubstr(why))) << name;
  };
  refuses("x", DType::F32, {4}, "declared twice");
  refuses("", DType::F32, {4}, "llama.cpp reads 1 to 63");
  refuses(std::string(64, 'n'), DType::F32, {4}, "has 64 bytes; llama.cpp reads 1 to 63");
  EXPECT_EQ(w.add_tensor(std::string(63, 'n'), DType::F32, {4}), 16u);
  refuses("no.dims", DType::F32, {}, "0 dimensions");
  refuses("five.dims", DType::F32, {1, 1, 1, 1, 1}, "5 dimensions");
  refuses("negative", DType::F32, {4, -1}, "cannot be negative");
  refuses("overflow", DType::F32, {1LL << 32, 1LL << 32}, "overflows int64");
  refuses("bytes.overflow", DType::F64, {1LL << 60, 4}, "size in bytes overflows");
  refuses("partial.block", DType::Q4_0, {48}, "not a multiple of the q4_0 block size 32");
  EXPECT_THROW(w.add_tensor("bad.type", static_cast<DType>(4), {4}), Error);
}

TEST(GgufWriter, RefusesBadAlignment) {
  GgufWriter w;
  EXPECT_THAT([&] { w.set_alignment(0); }, ::testing::ThrowsMessage<Error>(HasSubstr("not a power of two")));
  EXPECT_THAT([&] { w.set_alignment(48); }, ::testing::ThrowsMessage<Error>(HasSubstr("48 is not a power of two")));
  EXPECT_THAT([&] { w.set("general.alignment", GgufMetaValue::u64(32)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("must be a u32")));
  EXPECT_EQ(w.alignment(), kGgufDefaultAlignment);
}

TEST(GgufWriter, EnforcesTheOrderOfWriting) {
  TempPath path;
  GgufWriter w;
  std::vector<std::uint8_t> bytes = pattern(64, 3);
  w.add_tensor("first", DType::F32, {8});
  w.add_tensor("second", DType::F32, {8});
  EXPECT_THROW(w.write_tensor_data("first", bytes), Error);  // before begin()
  EXPECT_THROW(w.finish(), Error);
  w.begin(path.str());
  EXPECT_TRUE(std::filesystem::exists(path.str() + ".part"));
  EXPECT_FALSE(std::filesystem::exists(path.str()));
  EXPECT_THROW(w.set("late", GgufMetaValue::u8(1)), Error);
  EXPECT_THROW(w.add_tensor("late", DType::F32, {1}), Error);
  EXPECT_THROW(w.begin(path.str()), Error);
  EXPECT_THAT([&] { w.write_tensor_data("second", std::span(bytes).first(32)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tensor first is next")));
  EXPECT_THAT([&] { w.write_tensor_data("third", std::span(bytes).first(32)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("no tensor third")));
  EXPECT_THAT([&] { w.write_tensor_data("first", bytes); },
              ::testing::ThrowsMessage<Error>(HasSubstr("would pass its size of 32 bytes")));
  w.write_tensor_data("first", std::span(bytes).first(32));
  w.write_tensor_data("second", std::span(bytes).first(16));
  EXPECT_THAT([&] { w.finish(); }, ::testing::ThrowsMessage<Error>(HasSubstr("tensor second has 16 of its 32")));
  w.write_tensor_data("second", std::span(bytes).subspan(16, 16));
  EXPECT_THAT([&] { w.write_tensor_data("second", std::span(bytes).first(1)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("every tensor is complete")));
  w.finish();
  EXPECT_TRUE(std::filesystem::exists(path.str()));
  EXPECT_FALSE(std::filesystem::exists(path.str() + ".part"));
  EXPECT_EQ(GgufFile::open(path.str()).tensors().size(), 2u);
}

TEST(GgufWriter, AnUnfinishedFileLeavesNothingBehind) {
  TempPath path;
  {
    GgufWriter w;
    w.add_tensor("t", DType::F32, {8});
    w.begin(path.str());
    EXPECT_TRUE(std::filesystem::exists(path.str() + ".part"));
  }
  EXPECT_FALSE(std::filesystem::exists(path.str() + ".part"));
  EXPECT_FALSE(std::filesystem::exists(path.str()));
}

TEST(GgufWriter, ReportsAnUnwritableDirectory) {
  GgufWriter w;
  EXPECT_THAT([&] { w.begin("/nonexistent-folio-dir/x.gguf"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cannot create /nonexistent-folio-dir/x.gguf.part")));
}

TEST(GgufWriter, WritesVersion3ThatReadsAlsoAsVersion2) {
  TempPath path;
  GgufWriter w;
  w.set("k", GgufMetaValue::u8(1));
  w.begin(path.str());
  w.finish();
  std::vector<std::uint8_t> bytes = read_all(path.str());
  ASSERT_GE(bytes.size(), 24u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 4), "GGUF");
  EXPECT_EQ(bytes[4], 3);
  // v2 and v3 share one layout for little-endian files.
  bytes[4] = 2;
  GgufFile f = GgufFile::from_bytes(bytes, "v2");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_int("k", 0), 1);
}

// A real model, copied through GgufMetaValue::from and the streaming writer,
// comes out byte for byte as llama.cpp's converter wrote it.
TEST(GgufWriter, CopiesARealModelByteForByte) {
  FOLIO_REQUIRE_MODEL(model, testing::kSmolLM2);
  GgufFile src = GgufFile::open(model);
  TempPath path;
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) w.set(key, GgufMetaValue::from(value));
  for (const auto& t : src.tensors())
    w.add_tensor(t.name, t.type, std::span(t.shape.data(), static_cast<std::size_t>(t.num_dims)));
  w.begin(path.str());
  EXPECT_EQ(w.data_offset(), src.data_offset());
  for (const auto& t : src.tensors()) w.write_tensor_data(t.name, {t.data, t.size_bytes});
  w.finish();

  MappedFile original(model), copy(path.str());
  ASSERT_EQ(copy.size(), original.size());
  EXPECT_EQ(0, std::memcmp(copy.data(), original.data(), original.size()));
}

}  // namespace
}  // namespace folio
