// Hostile safetensors input: a table of crafted headers (each refused with an
// Error that says what is wrong), every truncation and many byte flips of a
// valid file (refused or read whole, never a crash), and broken Hugging Face
// directories (a missing config, an index that points outside the directory
// or at the wrong shard).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "model/hf_checkpoint.h"
#include "model/safetensors_file.h"

namespace folio {
namespace {

using ::testing::HasSubstr;

// A file: the 8-byte little-endian header length, the header (padded with
// spaces to a multiple of 8 bytes, as writers pad it), the data.
std::vector<std::uint8_t> file_of(std::string header, std::size_t data_bytes,
                                  std::uint64_t stated_length = ~std::uint64_t{0}) {
  while (header.size() % 8 != 0) header += ' ';
  const std::uint64_t length = stated_length == ~std::uint64_t{0} ? header.size() : stated_length;
  std::vector<std::uint8_t> bytes(8 + header.size() + data_bytes, 0);
  std::memcpy(bytes.data(), &length, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  for (std::size_t i = 0; i < data_bytes; ++i) bytes[8 + header.size() + i] = static_cast<std::uint8_t>(i * 7);
  return bytes;
}

// A valid header of 40 bytes' data: a [2, 3] f32, a [4] bf16, an empty f16
// and a [4] f16.
std::string valid_header() {
  std::string h =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},"c":{"dtype":"F16","shape":[0,5],"data_offsets":[32,32]},)"
      R"("d":{"dtype":"F16","shape":[4],"data_offsets":[32,40]}})";
  while (h.size() % 8 != 0) h += ' ';
  return h;
}

// A header of one tensor, t.
std::string one(const std::string& entry) { return R"({"t":)" + entry + "}"; }

struct HostileCase {
  std::string name;
  std::vector<std::uint8_t> bytes;
  std::vector<std::string> substrings;
};

void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

std::vector<HostileCase> cases() {
  const std::string f32_24 = R"("dtype":"F32","shape":[2,3])";
  return {
      {"empty", {}, {"has 0 bytes", "header length"}},
      {"length_cut", {1, 0, 0, 0}, {"has 4 bytes"}},
      {"length_huge", file_of("{}", 0, std::uint64_t{1} << 62), {"header length 4611686018427387904 is more than"}},
      {"length_past_end", file_of("{}      ", 0, 4000), {"runs past the end of the file"}},
      {"length_zero", file_of("", 8), {"cannot hold a JSON object"}},
      {"not_an_object", file_of("[1, 2, 3]", 0), {"does not start with '{'"}},
      {"json_truncated", file_of(R"({"t": {"dtype": "F32",)", 0), {"not well-formed JSON"}},
      {"json_trailing_garbage", file_of(R"({} x)", 0), {"not well-formed JSON"}},
      {"json_bad_utf8", file_of("{\"\xff\": 1}", 0), {"not well-formed JSON"}},
      {"tensor_name_empty", file_of(R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4), {"empty name"}},
      {"tensor_not_object", file_of(one("3"), 0), {"tensor t is not an object"}},
      {"dtype_missing", file_of(one(R"({"shape":[1],"data_offsets":[0,4]})"), 4), {"tensor t has no dtype"}},
      {"dtype_number", file_of(one(R"({"dtype":1,"shape":[1],"data_offsets":[0,4]})"), 4), {"no dtype string"}},
      {"dtype_unknown",
       file_of(one(R"({"dtype":"F33","shape":[1],"data_offsets":[0,4]})"), 4),
       {"unknown dtype \"F33\""}},
      {"dtype_i64",
       file_of(one(R"({"dtype":"I64","shape":[1],"data_offsets":[0,8]})"), 8),
       {"dtype I64, which folio does not read (F32, F16, BF16, and F8_E4M3 and U8"}},
      {"dtype_f8_e5m2",
       file_of(one(R"({"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]})"), 8),
       {"dtype F8_E5M2, which folio does not read"}},
      {"shape_missing", file_of(one(R"({"dtype":"F32","data_offsets":[0,4]})"), 4), {"no shape array"}},
      {"shape_negative",
       file_of(one(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), 4),
       {"dimension 0 is not a count"}},
      {"shape_fraction",
       file_of(one(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,4]})"), 4),
       {"dimension 0 is not a count"}},
      {"shape_five_dims",
       file_of(one(R"({"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]})"), 4),
       {"5 dimensions; folio handles at most 4"}},
      {"shape_product_overflows",
       file_of(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"), 4),
       {"product of the dimensions overflows"}},
      {"size_overflows",
       file_of(one(R"({"dtype":"F32","shape":[4611686018427387904,2],"data_offsets":[0,4]})"), 4),
       {"overflows"}},
      {"offsets_missing", file_of(one("{" + f32_24 + "}"), 24), {"no data_offsets pair"}},
      {"offsets_three", file_of(one("{" + f32_24 + R"(,"data_offsets":[0,24,48]})"), 24), {"no data_offsets pair"}},
      {"offsets_negative",
       file_of(one("{" + f32_24 + R"(,"data_offsets":[-8,16]})"), 24),
       {"lie outside the data section of 24 bytes"}},
      {"offsets_past_end",
       file_of(one("{" + f32_24 + R"(,"data_offsets":[8,32]})"), 24),
       {"data_offsets [8, 32] lie outside the data section of 24 bytes"}},
      {"offsets_huge",
       file_of(one("{" + f32_24 + R"(,"data_offsets":[18446744073709551600,8]})"), 24),
       {"outside the data section"}},
      {"offsets_reversed", file_of(one("{" + f32_24 + R"(,"data_offsets":[24,0]})"), 24), {"end before they begin"}},
      {"size_wrong",
       file_of(one("{" + f32_24 + R"(,"data_offsets":[0,20]})"), 24),
       {"holds 20 bytes but its shape [2,3] of F32 needs 24"}},
      {"misaligned",
       file_of(one(R"({"dtype":"F32","shape":[1],"data_offsets":[2,6]})"), 8),
       {"not a multiple of its element size 4"}},
      {"overlap",
       file_of(
           R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
           16),
       {"overlaps tensor"}},
      {"same_offsets",
       file_of(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           16),
       {"overlaps tensor"}},
      {"duplicate_name",
       file_of(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
           16),
       {"tensor a is listed twice"}},
      {"duplicate_field",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"shape":[1]}})", 8),
       {"a names shape twice"}},
      {"metadata_not_object", file_of(R"({"__metadata__":[1]})", 0), {"__metadata__ is not an object"}},
      {"metadata_value_number", file_of(R"({"__metadata__":{"format":1}})", 0), {"__metadata__ key format"}},
      {"nested_deep", file_of(R"({"t":{"dtype":{"a":{"b":[[]]}}}})", 0), {"nested deeper than"}},
      {"nested_very_deep",
       file_of("{\"t\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0),
       {"nested deeper than"}},
  };
}

class SafetensorsHostile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(SafetensorsHostile, IsRefusedWithTheProblemNamed) {
  const HostileCase& c = GetParam();
  try {
    SafetensorsFile::from_bytes(c.bytes, "x.safetensors");
    FAIL() << c.name << " was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, ::testing::StartsWith("bad safetensors file x.safetensors: "));
    for (const auto& s : c.substrings) EXPECT_THAT(message, HasSubstr(s));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, SafetensorsHostile, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<HostileCase>& p) { return p.param.name; });

TEST(SafetensorsFile, ReadsAValidFile) {
  const std::vector<std::uint8_t> bytes = file_of(valid_header(), 40);
  SafetensorsFile f = SafetensorsFile::from_bytes(bytes, "valid");
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.data_offset(), 8 + valid_header().size());
  const SafetensorsTensor* a = f.find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->num_dims, 2);
  EXPECT_EQ(a->shape[0], 2);
  EXPECT_EQ(a->shape[1], 3);
  EXPECT_EQ(a->size_bytes, 24u);
  EXPECT_EQ(a->data, bytes.data() + f.data_offset());
  EXPECT_EQ(f.find_tensor("b")->dtype, DType::BF16);
  EXPECT_EQ(f.find_tensor("c")->num_elements, 0);
  EXPECT_EQ(f.find_tensor("d")->dtype, DType::F16);
  EXPECT_EQ(f.find_tensor("__metadata__"), nullptr);
  ASSERT_EQ(f.metadata().size(), 1u);
  EXPECT_EQ(f.metadata()[0].first, "format");
  EXPECT_EQ(f.metadata()[0].second, "pt");
}

TEST(SafetensorsFile, EveryTruncationIsRefusedOrReadWhole) {
  const std::vector<std::uint8_t> bytes = file_of(valid_header(), 40);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    std::span<const std::uint8_t> prefix(bytes.data(), n);
    EXPECT_THROW(SafetensorsFile::from_bytes(prefix, "prefix"), Error) << n << " bytes";
  }
}

// Flipped bytes anywhere in the header: refused with an Error, or read as a
// file whose tensors all lie inside it. Never a crash.
TEST(SafetensorsFile, ByteFlipsNeverCrash) {
  const std::vector<std::uint8_t> bytes = file_of(valid_header(), 40);
  std::mt19937 rng(7);
  int refused = 0, read = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    std::vector<std::uint8_t> damaged = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < flips; ++i)
      damaged[rng() % (8 + valid_header().size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    try {
      SafetensorsFile f = SafetensorsFile::from_bytes(damaged, "damaged");
      for (const SafetensorsTensor& t : f.tensors()) {
        EXPECT_GE(t.data, damaged.data());
        EXPECT_LE(t.data + t.size_bytes, damaged.data() + damaged.size());
      }
      ++read;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  std::printf("byte flips: %d refused, %d read\n", refused, read);
}

// ------------------------------------------------------------ directories

class HfDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("folio_hf_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), ::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
  void write_bytes(const std::string& name, const std::vector<std::uint8_t>& bytes) {
    std::ofstream(dir_ / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::string error_of() {
    try {
      HfCheckpoint::open(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  }

  std::filesystem::path dir_;
};

TEST_F(HfDirectory, MissingConfigIsNamed) { EXPECT_THAT(error_of(), HasSubstr("config.json")); }

TEST_F(HfDirectory, BadConfigJsonIsNamed) {
  write("config.json", "{\"architectures\": [");
  EXPECT_THAT(error_of(), HasSubstr("config.json is not well-formed JSON"));
}

TEST_F(HfDirectory, MissingWeightsAreNamed) {
  write("config.json", "{}");
  write("pytorch_model.bin", "x");
  EXPECT_THAT(error_of(), HasSubstr("holds neither model.safetensors nor model.safetensors.index.json"));
  EXPECT_THAT(error_of(), HasSubstr("safe_serialization"));
}

TEST_F(HfDirectory, IndexMayNotLeaveTheDirectory) {
  write("config.json", "{}");
  write("model.safetensors.index.json", R"({"weight_map": {"a": "../../etc/passwd"}})");
  EXPECT_THAT(error_of(), HasSubstr("is not a file name in the model's directory"));
}

TEST_F(HfDirectory, IndexMustMatchTheShards) {
  write("config.json", "{}");
  write_bytes("one.safetensors", file_of(valid_header(), 40));
  write("model.safetensors.index.json", R"({"weight_map": {"a": "one.safetensors", "zz": "one.safetensors"}})");
  EXPECT_THAT(error_of(), HasSubstr("lists tensor zz in one.safetensors, which does not hold it"));
  write("model.safetensors.index.json", R"({"weight_map": {"a": "one.safetensors"}})");
  EXPECT_THAT(error_of(), HasSubstr("holds 4 tensors but"));
}

TEST_F(HfDirectory, TensorsInTwoShardsAreRefused) {
  write("config.json", "{}");
  write_bytes("one.safetensors", file_of(valid_header(), 40));
  write_bytes("two.safetensors", file_of(valid_header(), 40));
  write("model.safetensors.index.json",
        R"({"weight_map": {"a": "one.safetensors", "b": "one.safetensors", "c": "one.safetensors",
            "d": "one.safetensors", "x": "two.safetensors"}})");
  EXPECT_THAT(error_of(), HasSubstr("is in two shards"));
}

TEST_F(HfDirectory, ABadShardIsNamed) {
  write("config.json", "{}");
  write_bytes("model.safetensors", file_of("[]", 0));
  EXPECT_THAT(error_of(), HasSubstr("bad safetensors file " + (dir_ / "model.safetensors").string()));
}

TEST(HfTensorNames, MapOntoGgufNames) {
  EXPECT_EQ(gguf_tensor_name("model.embed_tokens.weight", false), "token_embd.weight");
  EXPECT_EQ(gguf_tensor_name("lm_head.weight", false), "output.weight");
  EXPECT_EQ(gguf_tensor_name("model.norm.weight", false), "output_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.self_attn.q_proj.weight", false), "blk.0.attn_q.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.12.self_attn.k_proj.bias", false), "blk.12.attn_k.bias");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.self_attn.o_proj.weight", false), "blk.3.attn_output.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.self_attn.q_norm.weight", false), "blk.3.attn_q_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.mlp.down_proj.weight", false), "blk.3.ffn_down.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.post_attention_layernorm.weight", false), "blk.3.ffn_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.post_attention_layernorm.weight", true),
            "blk.3.post_attention_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.pre_feedforward_layernorm.weight", true), "blk.3.ffn_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.3.post_feedforward_layernorm.weight", true), "blk.3.post_ffw_norm.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.x.mlp.down_proj.weight", false), "");
  EXPECT_EQ(gguf_tensor_name("model.layers.-1.mlp.down_proj.weight", false), "");
  EXPECT_EQ(gguf_tensor_name("model.layers.99999999999.mlp.down_proj.weight", false), "");
  EXPECT_EQ(gguf_tensor_name("model.layers.1.mlp.experts.0.weight", false), "");
  EXPECT_EQ(gguf_tensor_name("vision_tower.weight", false), "");
}

}  // namespace
}  // namespace folio
