// GgufFile on the real models of the cache (values read with the gguf Python
// package and written in here), and the reader's own checks on crafted bytes.
#include "model/gguf_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>

#include "core/error.h"
#include "support/test_models.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::uint64_t fnv1a(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::uint64_t fnv1a(std::string_view s) { return fnv1a(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()); }

float first_float(const GgufTensorInfo& t) {
  float f;
  std::memcpy(&f, t.data, 4);
  return f;
}

std::map<DType, int> count_types(const GgufFile& f) {
  std::map<DType, int> n;
  for (const auto& t : f.tensors()) ++n[t.type];
  return n;
}

std::uint64_t total_bytes(const GgufFile& f) {
  std::uint64_t n = 0;
  for (const auto& t : f.tensors()) n += t.size_bytes;
  return n;
}

// What every well-formed file keeps: tensors inside the file, aligned, disjoint.
void expect_layout_invariants(const GgufFile& f) {
  EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
    EXPECT_EQ(t.file_offset, f.data_offset() + t.offset) << t.name;
    EXPECT_LE(t.file_offset + t.size_bytes, f.file_size()) << t.name;
    EXPECT_EQ(static_cast<std::int64_t>(t.size_bytes), row_bytes(t.type, t.shape[0]) * t.rows()) << t.name;
    EXPECT_EQ(f.find_tensor(t.name), &t);
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    EXPECT_LE(by_offset[i - 1]->offset + by_offset[i - 1]->size_bytes, by_offset[i]->offset);
}

TEST(GgufFileModels, SmolLM2) {
  FOLIO_REQUIRE_MODEL(path, testing::kSmolLM2);
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.file_size(), 98362432u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 1785664u);
  ASSERT_EQ(f.metadata().size(), 33u);
  EXPECT_EQ(f.metadata().front().first, "general.architecture");
  EXPECT_EQ(f.metadata().back().first, "general.quantization_version");

  EXPECT_EQ(f.get_string("general.architecture", ""), "llama");
  EXPECT_EQ(f.get_string("general.name", ""), "Smollm2 135M 8k Lc100K Mix1 Ep2");
  EXPECT_EQ(f.get_string("general.organization", ""), "HuggingFaceTB");
  EXPECT_THAT(f.get("general.languages").strings("general.languages"), ElementsAre("en"));
  EXPECT_EQ(f.get("llama.block_count").type(), GgufType::kU32);
  EXPECT_EQ(f.get_int("llama.block_count", 0), 30);
  EXPECT_EQ(f.get_int("llama.context_length", 0), 8192);
  EXPECT_EQ(f.get_int("llama.embedding_length", 0), 576);
  EXPECT_EQ(f.get_int("llama.feed_forward_length", 0), 1536);
  EXPECT_EQ(f.get_int("llama.attention.head_count", 0), 9);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv", 0), 3);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count", 0), 64);
  EXPECT_EQ(f.get_int("llama.vocab_size", 0), 49152);
  EXPECT_EQ(f.get("llama.rope.freq_base").type(), GgufType::kF32);
  EXPECT_EQ(f.get_float("llama.rope.freq_base", 0), 100000.0);
  EXPECT_EQ(f.get_float("llama.attention.layer_norm_rms_epsilon", 0), static_cast<double>(1e-5f));
  EXPECT_EQ(f.get_int("general.file_type", 0), 3);
  EXPECT_EQ(f.get_int("general.quantization_version", 0), 2);
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_space_prefix", true));
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token", true));
  EXPECT_EQ(f.get_string("tokenizer.ggml.model", ""), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre", ""), "smollm");
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id", -1), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id", -1), 2);
  EXPECT_EQ(f.get_int("tokenizer.ggml.unknown_token_id", -1), 0);
  EXPECT_EQ(f.get_int("tokenizer.ggml.padding_token_id", -1), 2);

  const auto& tokens = f.get("tokenizer.ggml.tokens").strings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 49152u);
  EXPECT_EQ(tokens[0], "<|endoftext|>");
  EXPECT_EQ(tokens[1], "<|im_start|>");
  EXPECT_EQ(tokens[2], "<|im_end|>");
  EXPECT_EQ(tokens.back(), "ectable");
  auto types = f.get("tokenizer.ggml.token_type").ints("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 49152u);
  EXPECT_EQ(f.get("tokenizer.ggml.token_type").element_type(), GgufType::kI32);
  EXPECT_EQ(std::accumulate(types.begin(), types.end(), std::int64_t{0}), 49186);
  EXPECT_EQ(types[0], 3);
  EXPECT_EQ(types.back(), 1);
  const auto& merges = f.get("tokenizer.ggml.merges").strings("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 48900u);
  EXPECT_EQ(merges[0], "\xc4\xa0 t");  // "Ġ t"
  EXPECT_EQ(merges.back(), "ect able");
  std::string_view tmpl = f.get("tokenizer.chat_template").as_string("tokenizer.chat_template");
  EXPECT_EQ(tmpl.size(), 368u);
  EXPECT_EQ(fnv1a(tmpl), 0x45ec583d4d25bc3aull);
  EXPECT_EQ(f.find("absent.key"), nullptr);
  EXPECT_EQ(f.get_int("absent.key", -7), -7);
  EXPECT_THAT([&] { f.get("absent.key"); }, ::testing::ThrowsMessage<Error>(HasSubstr("no metadata key absent.key")));

  ASSERT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.tensors().front().name, "token_embd.weight");
  EXPECT_EQ(f.tensors().back().name, "output_norm.weight");
  EXPECT_EQ(count_types(f), (std::map<DType, int>{{DType::F32, 61}, {DType::Q4_1, 210}, {DType::Q8_0, 1}}));
  EXPECT_EQ(total_bytes(f), 96576768u);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, DType::Q8_0);
  EXPECT_EQ(embd->num_dims, 2);
  EXPECT_EQ(embd->shape[0], 576);
  EXPECT_EQ(embd->shape[1], 49152);
  EXPECT_EQ(embd->rows(), 49152);
  EXPECT_EQ(embd->size_bytes, 30081024u);
  EXPECT_EQ(embd->offset, 0u);
  EXPECT_EQ(embd->file_offset, 1785664u);
  const GgufTensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::Q4_1);
  EXPECT_EQ(q->size_bytes, 207360u);
  EXPECT_EQ(q->file_offset, 33806656u);
  const GgufTensorInfo* k = f.find_tensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(fnv1a(k->data, k->size_bytes), 0x2138684156e020d7ull);
  const GgufTensorInfo* norm = f.find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->num_dims, 1);
  EXPECT_EQ(norm->num_elements, 576);
  EXPECT_EQ(norm->file_offset, 98360128u);
  EXPECT_EQ(fnv1a(norm->data, norm->size_bytes), 0xea814bed6299e304ull);
  EXPECT_EQ(first_float(*norm), 1.7578125f);
  expect_layout_invariants(f);
}

TEST(GgufFileModels, Qwen25Coder05B) {
  FOLIO_REQUIRE_MODEL(path, testing::kQwen05B);
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.file_size(), 491400064u);
  EXPECT_EQ(f.data_offset(), 5947776u);
  ASSERT_EQ(f.metadata().size(), 26u);
  EXPECT_EQ(f.get_string("general.architecture", ""), "qwen2");
  EXPECT_EQ(f.get_string("general.name", ""), "Qwen2.5 Coder 0.5B Instruct AWQ");
  EXPECT_EQ(f.get_string("general.basename", ""), "Qwen2.5-Coder");
  EXPECT_EQ(f.get_int("qwen2.block_count", 0), 24);
  EXPECT_EQ(f.get_int("qwen2.context_length", 0), 32768);
  EXPECT_EQ(f.get_int("qwen2.embedding_length", 0), 896);
  EXPECT_EQ(f.get_int("qwen2.feed_forward_length", 0), 4864);
  EXPECT_EQ(f.get_int("qwen2.attention.head_count", 0), 14);
  EXPECT_EQ(f.get_int("qwen2.attention.head_count_kv", 0), 2);
  EXPECT_EQ(f.get_float("qwen2.rope.freq_base", 0), 1e6);
  EXPECT_EQ(f.get_float("qwen2.attention.layer_norm_rms_epsilon", 0), static_cast<double>(1e-6f));
  EXPECT_EQ(f.get_int("general.file_type", 0), 15);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre", ""), "qwen2");
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id", -1), 151645);
  EXPECT_EQ(f.get_int("tokenizer.ggml.padding_token_id", -1), 151643);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id", -1), 151643);
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token", true));
  const auto& tokens = f.get("tokenizer.ggml.tokens").strings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 151936u);
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(tokens[2], "#");
  EXPECT_EQ(tokens.back(), "[PAD151935]");
  auto types = f.get("tokenizer.ggml.token_type").ints("tokenizer.ggml.token_type");
  EXPECT_EQ(std::accumulate(types.begin(), types.end(), std::int64_t{0}), 153066);
  const auto& merges = f.get("tokenizer.ggml.merges").strings("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 151387u);
  EXPECT_EQ(merges[0], "\xc4\xa0 \xc4\xa0");           // "Ġ Ġ"
  EXPECT_EQ(merges.back(), "\xc3\xa2\xc2\xbd \xc4\xb9");  // "â½ Ĺ"
  std::string_view tmpl = f.get("tokenizer.chat_template").as_string("tokenizer.chat_template");
  EXPECT_EQ(tmpl.size(), 2507u);
  EXPECT_EQ(fnv1a(tmpl), 0xc2b27ee60f1b8775ull);

  ASSERT_EQ(f.tensors().size(), 291u);
  EXPECT_EQ(f.tensors().front().name, "output.weight");
  EXPECT_EQ(count_types(f), (std::map<DType, int>{{DType::F32, 121},
                                                  {DType::Q5_0, 133},
                                                  {DType::Q8_0, 13},
                                                  {DType::Q4_K, 12},
                                                  {DType::Q6_K, 12}}));
  EXPECT_EQ(total_bytes(f), 485452288u);
  const GgufTensorInfo* out = f.find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->type, DType::Q8_0);
  EXPECT_EQ(out->size_bytes, 144643072u);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, DType::Q5_0);
  EXPECT_EQ(embd->shape[1], 151936);
  EXPECT_EQ(embd->offset, 144643072u);
  const GgufTensorInfo* down = f.find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->type, DType::Q6_K);
  EXPECT_EQ(down->shape[0], 4864);
  EXPECT_EQ(down->shape[1], 896);
  EXPECT_EQ(down->size_bytes, 3575040u);
  EXPECT_EQ(down->offset, 238239232u);
  ASSERT_NE(f.find_tensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.bias")->size_bytes, 3584u);
  const GgufTensorInfo* k = f.find_tensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(fnv1a(k->data, k->size_bytes), 0xfb9369feaa9c89bfull);
  const GgufTensorInfo* norm = f.find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(fnv1a(norm->data, norm->size_bytes), 0x5864886003f682cull);
  EXPECT_EQ(first_float(*norm), 7.0625f);
  expect_layout_invariants(f);
}

TEST(GgufFileModels, GemmaAndQwen15BOpen) {
  struct Case {
    const char* file;
    const char* arch;
    std::size_t num_tensors, num_kv;
    std::uint64_t data_offset;
  };
  for (const Case& c : {Case{testing::kGemma3, "gemma3", 236, 33, 6525120},
                        Case{testing::kQwen15B, "qwen2", 339, 26, 5950528}}) {
    FOLIO_REQUIRE_MODEL(path, c.file);
    GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.get_string("general.architecture", ""), c.arch) << c.file;
    EXPECT_EQ(f.tensors().size(), c.num_tensors) << c.file;
    EXPECT_EQ(f.metadata().size(), c.num_kv) << c.file;
    EXPECT_EQ(f.data_offset(), c.data_offset) << c.file;
    expect_layout_invariants(f);
  }
}

TEST(GgufFileModels, EveryValueRendersAndCopiesKeepTheMapping) {
  FOLIO_REQUIRE_MODEL(path, testing::kSmolLM2);
  GgufFile original = GgufFile::open(path);
  GgufFile copy = original;  // shares the mapping
  for (const auto& [key, value] : copy.metadata()) EXPECT_FALSE(value.to_string().empty()) << key;
  EXPECT_EQ(copy.get("tokenizer.ggml.tokens").to_string(3),
            "[\"<|endoftext|>\", \"<|im_start|>\", \"<|im_end|>\", ... (49152 items)]");
  EXPECT_EQ(copy.find_tensor("output_norm.weight")->data, original.find_tensor("output_norm.weight")->data);
}

TEST(GgufFile, ReportsAMissingFile) {
  EXPECT_THAT([] { GgufFile::open("/nonexistent/model.gguf"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("cannot open /nonexistent/model.gguf")));
}

// Little hand-made files for checks that need exact bytes.
class Bytes {
 public:
  Bytes& u32(std::uint32_t v) { return raw(&v, 4); }
  Bytes& u64(std::uint64_t v) { return raw(&v, 8); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    v_.insert(v_.end(), b, b + n);
    return *this;
  }
  Bytes& header(std::uint64_t num_tensors, std::uint64_t num_kv) {
    return raw("GGUF", 4).u32(3).u64(num_tensors).u64(num_kv);
  }
  Bytes& pad_to(std::size_t alignment) {
    v_.resize((v_.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  const std::vector<std::uint8_t>& bytes() const { return v_; }

 private:
  std::vector<std::uint8_t> v_;
};

std::string parse_error(const Bytes& b) {
  try {
    GgufFile::from_bytes(b.bytes(), "crafted.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GgufFile, AnErrorNamesTheFileTheFieldAndTheByteAndSaysWhatToDo) {
  Bytes b;
  b.header(0, 1).str("k").u32(static_cast<std::uint32_t>(GgufType::kU64)).raw("abc", 3);  // 3 of 8 bytes
  EXPECT_EQ(parse_error(b),
            "bad GGUF file crafted.gguf: k at byte 37: needs 8 bytes but the file ends 3 bytes later; "
            "the file is damaged or cut short; fetch or convert it again");
}

TEST(GgufFile, UnprintableKeysAreEscapedInErrors) {
  Bytes b;
  b.header(0, 2).str("dup\n\x1b[2J").u32(0).raw("\x01", 1).str("dup\n\x1b[2J").u32(0).raw("\x01", 1);
  std::string e = parse_error(b);
  EXPECT_THAT(e, HasSubstr("dup\\x0a\\x1b[2J at byte 45: duplicate metadata key"));
  EXPECT_EQ(e.find('\x1b'), std::string::npos);
}

TEST(GgufFile, RefusesKeysLongerThanTheSpecAllows) {
  Bytes b;
  b.header(0, 1).str(std::string(kGgufMaxKeyBytes + 1, 'k')).u32(static_cast<std::uint32_t>(GgufType::kU8)).raw("\0", 1);
  EXPECT_THAT(parse_error(b), HasSubstr("metadata key #0 at byte 24: the key has 65536 bytes; at most 65535"));
  Bytes ok;
  ok.header(0, 1).str(std::string(kGgufMaxKeyBytes, 'k')).u32(static_cast<std::uint32_t>(GgufType::kU8)).raw("\0", 1);
  EXPECT_EQ(GgufFile::from_bytes(ok.bytes(), "x").metadata().size(), 1u);
}

TEST(GgufFile, RendersStringsWithoutControlBytes) {
  Bytes b;
  b.header(0, 2).str("s").u32(static_cast<std::uint32_t>(GgufType::kString)).str("a\x1b[31m\nb\x7f\xc3\xa9");
  b.str("list").u32(static_cast<std::uint32_t>(GgufType::kArray)).u32(static_cast<std::uint32_t>(GgufType::kString));
  b.u64(1).str("\r\x07");
  GgufFile f = GgufFile::from_bytes(b.bytes(), "x");
  EXPECT_EQ(f.get("s").to_string(), "\"a\\x1b[31m b\\x7f\xc3\xa9\"");
  EXPECT_EQ(f.get("list").to_string(), "[\" \\x07\"]");
  EXPECT_EQ(f.get("s").as_string("s"), "a\x1b[31m\nb\x7f\xc3\xa9");  // the value itself is untouched
}

TEST(GgufFile, AllowsZeroTensorsAndNoDataSection) {
  Bytes b;
  b.header(0, 1).str("general.architecture").u32(8).str("none");
  GgufFile f = GgufFile::from_bytes(b.bytes(), "x");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.get_string("general.architecture", ""), "none");
}

TEST(GgufFile, AcceptsTheExtremeIntegers) {
  Bytes b;
  const std::int64_t i64s[] = {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()};
  b.header(0, 3)
      .str("min")
      .u32(static_cast<std::uint32_t>(GgufType::kI64))
      .u64(static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::min()))
      .str("arr")
      .u32(static_cast<std::uint32_t>(GgufType::kArray))
      .u32(static_cast<std::uint32_t>(GgufType::kI64))
      .u64(2)
      .raw(i64s, sizeof i64s)
      .str("bool")
      .u32(static_cast<std::uint32_t>(GgufType::kBool))
      .raw("\x02", 1);  // not 0 or 1: still true, as C reads it
  GgufFile f = GgufFile::from_bytes(b.bytes(), "x");
  EXPECT_EQ(f.get_int("min", 0), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(f.get_float("min", 0), -9223372036854775808.0);
  EXPECT_THAT(f.get("arr").ints("arr"), ElementsAre(i64s[0], i64s[1]));
  EXPECT_TRUE(f.get_bool("bool", false));
  EXPECT_THAT([&] { f.get("min").as_uint("min"); }, ::testing::ThrowsMessage<Error>(HasSubstr("cannot be negative")));
}

TEST(GgufFile, ZeroSizeTensorsMayShareAnOffset) {
  Bytes b;
  b.header(3, 0);
  for (const char* name : {"a", "b"}) b.str(name).u32(2).u64(0).u64(5).u32(0).u64(0);
  b.str("c").u32(1).u64(8).u32(0).u64(0);
  b.pad_to(32);
  std::vector<std::uint8_t> data(32, 7);
  b.raw(data.data(), data.size());
  GgufFile f = GgufFile::from_bytes(b.bytes(), "x");
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensors()[0].size_bytes, 0u);
  EXPECT_EQ(f.tensors()[1].num_elements, 0);
  EXPECT_EQ(f.tensors()[2].size_bytes, 32u);
}

TEST(GgufFile, TensorNamesMayTakeTheSpecs64Bytes) {
  Bytes b;
  b.header(1, 0).str(std::string(64, 'n')).u32(1).u64(0).u32(0).u64(0).pad_to(32);
  EXPECT_EQ(GgufFile::from_bytes(b.bytes(), "x").tensors()[0].name.size(), 64u);
}

TEST(GgufFile, AlignmentOneAllowsAnyOffset) {
  Bytes b;
  b.header(2, 1).str("general.alignment").u32(static_cast<std::uint32_t>(GgufType::kU32)).u32(1);
  b.str("a").u32(1).u64(3).u32(static_cast<std::uint32_t>(DType::I8)).u64(0);
  b.str("b").u32(1).u64(2).u32(static_cast<std::uint32_t>(DType::I8)).u64(3);
  b.raw("\x01\x02\x03\x04\x05", 5);
  GgufFile f = GgufFile::from_bytes(b.bytes(), "x");
  EXPECT_EQ(f.alignment(), 1u);
  EXPECT_EQ(f.find_tensor("b")->data[1], 5);
  EXPECT_EQ(f.data_offset() + 5, f.file_size());
}

}  // namespace
}  // namespace folio
