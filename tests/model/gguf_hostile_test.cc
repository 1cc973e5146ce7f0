// Hostile GGUF input: the crafted corpus of tests/data/bad_gguf (each file
// refused with an Error naming its field and byte), and every truncation and
// many byte flips of a valid file (refused or read whole, never a crash).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "model/gguf_file.h"
#include "backend/backend_factory.h"
#include "model/gguf_writer.h"
#include "model/model_loader.h"
#include "support/test_models.h"

namespace folio {
namespace {

using ::testing::HasSubstr;

struct BadFile {
  std::string file;
  std::vector<std::string> substrings;
};

void PrintTo(const BadFile& b, std::ostream* os) { *os << b.file; }

std::string corpus_dir() { return testing::source_path("tests/data/bad_gguf"); }

// expected.tsv: per line a file, then the substrings its error must contain.
std::vector<BadFile> load_expected() {
  std::vector<BadFile> out;
  std::ifstream in(corpus_dir() + "/expected.tsv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::stringstream fields(line);
    BadFile b;
    std::getline(fields, b.file, '\t');
    for (std::string s; std::getline(fields, s, '\t');) b.substrings.push_back(s);
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufHostileCorpus, EveryFileIsListedWithItsExpectedError) {
  std::vector<BadFile> expected = load_expected();
  EXPECT_GE(expected.size(), 40u) << "run: python3 scripts/make_bad_gguf.py";
  std::set<std::string> listed, present;
  for (const auto& b : expected) {
    EXPECT_TRUE(listed.insert(b.file).second) << b.file << " is listed twice";
    EXPECT_FALSE(b.substrings.empty()) << b.file;
  }
  for (const auto& entry : std::filesystem::directory_iterator(corpus_dir()))
    if (entry.path().extension() == ".gguf") present.insert(entry.path().filename().string());
  EXPECT_EQ(listed, present);
}

class GgufHostile : public ::testing::TestWithParam<BadFile> {};

TEST_P(GgufHostile, IsRefusedWithTheFieldNamed) {
  const BadFile& bad = GetParam();
  const std::string path = corpus_dir() + "/" + bad.file;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  std::string message;
  try {
    GgufFile::open(path);
    FAIL() << bad.file << " was accepted";
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_THAT(message, ::testing::StartsWith("bad GGUF file " + path + ": "));
  for (const auto& s : bad.substrings) EXPECT_THAT(message, HasSubstr(s)) << bad.file;

  // The same bytes given directly fail the same way.
  std::vector<std::uint8_t> bytes = read_all(path);
  try {
    GgufFile::from_bytes(bytes, path);
    FAIL() << bad.file << " was accepted from bytes";
  } catch (const Error& e) {
    EXPECT_EQ(message, e.what());
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, GgufHostile, ::testing::ValuesIn(load_expected()),
                         [](const ::testing::TestParamInfo<BadFile>& param_info) {
                           std::string name = param_info.param.file.substr(0, param_info.param.file.rfind('.'));
                           for (auto& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// A valid file of every kind of record, made by the writer.
std::vector<std::uint8_t> valid_file() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string path = (std::filesystem::temp_directory_path() /
                      fmt::format("folio_hostile_{}_{}.gguf", test->name(), ::getpid()))
                         .string();
  GgufWriter w;
  const std::int32_t ints[] = {1, -2, 3};
  w.set("general.architecture", GgufMetaValue::string("llama"));
  w.set("general.alignment", GgufMetaValue::u32(64));
  w.set("u8", GgufMetaValue::u8(7));
  w.set("f64", GgufMetaValue::f64(0.5));
  w.set("flag", GgufMetaValue::boolean(true));
  w.set("tokens", GgufMetaValue::strings({"a", "bc", ""}));
  w.set("ints", GgufMetaValue::array_of<std::int32_t>(ints));
  w.set("nested", GgufMetaValue::array(GgufType::kArray, {GgufMetaValue::strings({"x"}),
                                                          GgufMetaValue::array(GgufType::kU64, {})}));
  std::vector<std::uint8_t> a(4 * 16, 1), b(34 * 2, 2), c(2 * 6, 3);
  w.add_tensor("a", DType::F32, {16});
  w.add_tensor("b", DType::Q8_0, {32, 2});
  w.add_tensor("empty", DType::F16, {0, 3});
  w.add_tensor("c", DType::F16, {3, 2});
  w.begin(path);
  w.write_tensor_data("a", a);
  w.write_tensor_data("b", b);
  w.write_tensor_data("c", c);
  w.finish();
  std::vector<std::uint8_t> bytes = read_all(path);
  std::filesystem::remove(path);
  return bytes;
}

// What an accepted file must keep, however it was damaged.
void expect_sound(const GgufFile& f) {
  for (const auto& t : f.tensors()) {
    ASSERT_LE(t.file_offset + t.size_bytes, f.file_size()) << t.name;
    ASSERT_EQ(t.offset % f.alignment(), 0u) << t.name;
    ASSERT_GE(t.num_dims, 1);
    ASSERT_LE(t.num_dims, kGgufMaxDims);
    const DTypeInfo& dt = info(t.type);
    ASSERT_EQ(t.shape[0] % dt.block_elems, 0) << t.name;
    ASSERT_EQ(t.size_bytes, static_cast<std::uint64_t>(t.num_elements / dt.block_elems * dt.block_bytes)) << t.name;
  }
  for (const auto& [key, value] : f.metadata()) (void)value.to_string();
}

TEST(GgufHostileMutations, EveryTruncationIsRefusedUntilTheLastTensorIsWhole) {
  std::vector<std::uint8_t> bytes = valid_file();
  GgufFile whole = GgufFile::from_bytes(bytes, "whole");
  const GgufTensorInfo* c = whole.find_tensor("c");
  ASSERT_NE(c, nullptr);
  const std::size_t needed = c->file_offset + c->size_bytes;  // c is the last tensor in the file
  ASSERT_LT(needed, bytes.size());  // the writer pads after the last tensor too
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    std::span<const std::uint8_t> prefix(bytes.data(), n);
    if (n < needed) {
      EXPECT_THROW(GgufFile::from_bytes(prefix, "prefix"), Error) << n << " bytes";
    } else {
      GgufFile f = GgufFile::from_bytes(prefix, "prefix");
      EXPECT_EQ(f.tensors().size(), 4u);
    }
  }
}

TEST(GgufHostileMutations, ByteFlipsAreRefusedOrReadSoundly) {
  std::vector<std::uint8_t> bytes = valid_file();
  const std::size_t head = GgufFile::from_bytes(bytes, "whole").data_offset();
  int refused = 0, accepted = 0;
  for (std::size_t i = 0; i < head; ++i) {
    for (std::uint8_t flip : {0x01, 0x80, 0xFF}) {
      std::vector<std::uint8_t> damaged = bytes;
      damaged[i] ^= flip;
      try {
        GgufFile f = GgufFile::from_bytes(damaged, "damaged");
        expect_sound(f);
        ++accepted;
      } catch (const Error&) {
        ++refused;
      }
    }
  }
  // Most header bytes matter; some (string contents, values) may change freely.
  EXPECT_GT(refused, accepted / 2);
  EXPECT_GT(accepted, 0);
}

// The 4-bit grid types: sizes come from each type's block (32 or 256
// elements in 18, 136 or 17 bytes; NVFP4's 64 in 36), never from the file; a
// row that is not whole blocks is refused; a cut file is refused.
TEST(GgufHostileMutations, GridTypesAreSizedPerBlock) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("folio_hostile_grid_{}.gguf", ::getpid()))
                               .string();
  struct Case {
    const char* name;
    DType type;
    std::vector<std::int64_t> shape;
    std::uint64_t bytes;
  };
  const Case cases[] = {{"nl", DType::IQ4_NL, {64, 3}, 6 * 18},
                        {"xs", DType::IQ4_XS, {512, 2}, 4 * 136},
                        {"mx", DType::MXFP4, {32, 5}, 5 * 17},
                        {"nv", DType::NVFP4, {192, 2}, 6 * 36}};
  GgufWriter w;
  w.set("general.architecture", GgufMetaValue::string("llama"));
  for (const Case& c : cases) w.add_tensor(c.name, c.type, c.shape);
  w.begin(path);
  for (const Case& c : cases) w.write_tensor_data(c.name, std::vector<std::uint8_t>(c.bytes, 0x5a));
  w.finish();
  std::vector<std::uint8_t> bytes = read_all(path);
  std::filesystem::remove(path);
  GgufFile f = GgufFile::from_bytes(bytes, "grid");
  std::size_t needed = 0;
  for (const Case& c : cases) {
    const GgufTensorInfo* t = f.find_tensor(c.name);
    ASSERT_NE(t, nullptr) << c.name;
    EXPECT_EQ(t->type, c.type);
    EXPECT_EQ(t->size_bytes, c.bytes) << c.name;
    needed = std::max<std::size_t>(needed, t->file_offset + t->size_bytes);
  }
  expect_sound(f);
  for (std::size_t n = needed - 40; n < needed; ++n)
    EXPECT_THROW(GgufFile::from_bytes(std::span<const std::uint8_t>(bytes.data(), n), "cut"), Error) << n;

  // "nv" with the row of "mx" (32 elements): half an NVFP4 block. The type
  // field follows the dims; patch "mx"'s type id to NVFP4's 40.
  const std::uint8_t mx_name[] = {2, 0, 0, 0, 0, 0, 0, 0, 'm', 'x'};
  auto it = std::search(bytes.begin(), bytes.end(), std::begin(mx_name), std::end(mx_name));
  ASSERT_NE(it, bytes.end());
  const std::size_t type_at = static_cast<std::size_t>(it - bytes.begin()) + sizeof(mx_name) + 4 + 2 * 8;
  ASSERT_EQ(bytes[type_at], static_cast<std::uint8_t>(DType::MXFP4));
  bytes[type_at] = static_cast<std::uint8_t>(DType::NVFP4);
  try {
    GgufFile::from_bytes(bytes, "half_block");
    FAIL() << "a row of half an nvfp4 block was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a multiple of the nvfp4 block size 64"));
  }
}

// A part of a split GGUF file (llama.cpp's gguf-split: split.no, split.count)
// is refused with how to join the parts, not read as a model missing tensors.
TEST(GgufHostile, SplitFilesSayHowToJoinThem) {
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("folio_split_{}.gguf", ::getpid())).string();
  GgufWriter w;
  w.set("general.architecture", GgufMetaValue::string("llama"));
  w.set("split.no", GgufMetaValue::u16(0));
  w.set("split.count", GgufMetaValue::u16(3));
  w.set("split.tensors.count", GgufMetaValue::i32(0));
  w.begin(path);
  w.finish();
  BackendOptions options;
  options.name = "reference";
  const auto backend = make_backend(options);
  try {
    load_model(path, *backend);
    ADD_FAILURE() << "a split part loaded";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("part 1 of 3 of a split GGUF"));
    EXPECT_THAT(e.what(), HasSubstr("llama-gguf-split --merge"));
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace folio
