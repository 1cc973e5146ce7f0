// The quantizer on small synthetic GGUF models: which type each tensor gets
// under each recipe (output protection, the medium mix's layers, row-length
// fallbacks, overrides), that every written tensor holds exactly what the
// reference encoder makes of the dequantized input, that metadata is carried
// over with the file type set, and that importance changes the blocks.
#include "offline/quantizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "model/gguf_writer.h"
#include "support/temp_path.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

using ::testing::HasSubstr;
using folio::testing::TempPath;

struct SyntheticTensor {
  std::string name;
  std::vector<std::int64_t> shape;  // row length first
  DType type = DType::F32;
};

std::vector<float> values_of(const std::string& name, std::int64_t n) {
  std::mt19937 rng(static_cast<std::uint32_t>(std::hash<std::string>{}(name)));
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Writes a model of `tensors` (values from values_of, encoded in each type).
void write_model(const std::string& path, const std::vector<SyntheticTensor>& tensors) {
  GgufWriter w;
  w.set("general.architecture", GgufMetaValue::string("llama"));
  w.set("general.name", GgufMetaValue::string("synthetic"));
  w.set("general.file_type", GgufMetaValue::u32(0));
  for (const auto& t : tensors) w.add_tensor(t.name, t.type, t.shape);
  w.begin(path);
  for (const auto& t : tensors) {
    std::int64_t n = 1;
    for (std::int64_t d : t.shape) n *= d;
    const std::vector<float> v = values_of(t.name, n);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(row_bytes(t.type, t.shape[0]) * (n / t.shape[0])));
    for (std::int64_t r = 0; r < n / t.shape[0]; ++r)
      quantize_row(t.type, v.data() + r * t.shape[0], bytes.data() + r * row_bytes(t.type, t.shape[0]), t.shape[0]);
    w.write_tensor_data(t.name, bytes);
  }
  w.finish();
}

// Eight layers: attention values 256 wide, FFN down 896 wide (not whole
// 256-blocks, as in Qwen2.5-0.5B), norms, an embedding and maybe an output.
std::vector<SyntheticTensor> eight_layers(bool with_output) {
  std::vector<SyntheticTensor> t;
  t.push_back({"token_embd.weight", {256, 16}});
  for (int l = 0; l < 8; ++l) {
    t.push_back({fmt::format("blk.{}.attn_norm.weight", l), {256}});
    t.push_back({fmt::format("blk.{}.attn_v.weight", l), {256, 4}});
    t.push_back({fmt::format("blk.{}.attn_q.weight", l), {256, 8}});
    t.push_back({fmt::format("blk.{}.ffn_down.weight", l), {896, 4}});
  }
  t.push_back({"output_norm.weight", {256}});
  if (with_output) t.push_back({"output.weight", {256, 16}});
  return t;
}

QuantizeOptions recipe(std::string_view name) {
  QuantizeOptions o;
  o.recipe = parse_quant_recipe(name).value();
  o.threads = 2;
  return o;
}

std::unordered_map<std::string, TensorQuantPlan> plan_by_name(const GgufFile& f, const QuantizeOptions& o) {
  std::unordered_map<std::string, TensorQuantPlan> out;
  for (auto& p : plan_quantization(f, o.recipe, o.overrides)) out.emplace(p.name, p);
  return out;
}

TEST(QuantRecipe, ParsesNamesAliasesAndCase) {
  EXPECT_EQ(parse_quant_recipe("Q4_K_M")->base, DType::Q4_K);
  EXPECT_EQ(parse_quant_recipe("q4_k")->name, "q4_k_m");
  EXPECT_EQ(parse_quant_recipe("q8_0")->file_type, 7u);
  EXPECT_EQ(parse_quant_recipe("q4_k_m")->file_type, 15u);
  EXPECT_EQ(parse_quant_recipe("bf16")->file_type, 32u);
  // llama.cpp's numbers (gguf's LlamaFileType): MOSTLY_IQ4_NL, MOSTLY_IQ4_XS,
  // MOSTLY_MXFP4_MOE, MOSTLY_NVFP4.
  EXPECT_EQ(parse_quant_recipe("iq4_nl")->file_type, 25u);
  EXPECT_EQ(parse_quant_recipe("IQ4_XS")->file_type, 30u);
  EXPECT_EQ(parse_quant_recipe("mxfp4")->file_type, 38u);
  EXPECT_EQ(parse_quant_recipe("nvfp4")->file_type, 39u);
  EXPECT_EQ(parse_quant_recipe("nvfp4")->base, DType::NVFP4);
  EXPECT_FALSE(parse_quant_recipe("q3_xl"));
}

TEST(QuantizerPlan, MediumMixProtectsOutputAndSomeLayers) {
  TempPath path;
  write_model(path.str(), eight_layers(/*with_output=*/true));
  const GgufFile f = GgufFile::open(path.str());
  auto plan = plan_by_name(f, recipe("q4_k_m"));
  EXPECT_EQ(plan["output.weight"].to, DType::Q6_K);
  EXPECT_EQ(plan["token_embd.weight"].to, DType::Q4_K);  // not tied: an ordinary table
  EXPECT_EQ(plan["blk.0.attn_norm.weight"].to, DType::F32);
  // Eight layers: the first and last eighth and every third in between.
  const std::vector<int> more_bits = {0, 3, 6, 7};
  for (int l = 0; l < 8; ++l) {
    const bool more = std::find(more_bits.begin(), more_bits.end(), l) != more_bits.end();
    EXPECT_EQ(plan[fmt::format("blk.{}.attn_v.weight", l)].to, more ? DType::Q6_K : DType::Q4_K) << l;
    EXPECT_EQ(plan[fmt::format("blk.{}.attn_q.weight", l)].to, DType::Q4_K) << l;
    // 896 is not whole 256-blocks: Q6_K falls back to Q8_0, Q4_K to Q5_0.
    const auto& down = plan[fmt::format("blk.{}.ffn_down.weight", l)];
    EXPECT_EQ(down.to, more ? DType::Q8_0 : DType::Q5_0) << l;
    EXPECT_THAT(down.why, HasSubstr("not whole 256-element blocks"));
  }
  auto small = plan_by_name(f, recipe("q4_k_s"));
  EXPECT_EQ(small["blk.0.attn_v.weight"].to, DType::Q4_K);
  EXPECT_EQ(small["output.weight"].to, DType::Q6_K);
  auto q8 = plan_by_name(f, recipe("q8_0"));
  EXPECT_EQ(q8["output.weight"].to, DType::Q8_0);
  EXPECT_EQ(q8["blk.3.ffn_down.weight"].to, DType::Q8_0);
}

// q3_k_m gives attention values and FFN down 4 bits, and 5 in the layers
// q4_k_m gives 6; rows that are not whole 256-blocks fall back from Q3_K to
// IQ4_NL (as llama.cpp does), from Q4_K to Q5_0 and from Q5_K to Q5_1.
TEST(QuantizerPlan, ThreeBitMixes) {
  EXPECT_EQ(parse_quant_recipe("q3_k")->name, "q3_k_m");
  EXPECT_EQ(parse_quant_recipe("q3_k_s")->file_type, 11u);
  EXPECT_EQ(parse_quant_recipe("q3_k_m")->file_type, 12u);
  TempPath path;
  write_model(path.str(), eight_layers(/*with_output=*/true));
  const GgufFile f = GgufFile::open(path.str());
  auto plan = plan_by_name(f, recipe("q3_k_m"));
  EXPECT_EQ(plan["output.weight"].to, DType::Q6_K);
  const std::vector<int> more_bits = {0, 3, 6, 7};
  for (int l = 0; l < 8; ++l) {
    const bool more = std::find(more_bits.begin(), more_bits.end(), l) != more_bits.end();
    EXPECT_EQ(plan[fmt::format("blk.{}.attn_v.weight", l)].to, more ? DType::Q5_K : DType::Q4_K) << l;
    EXPECT_EQ(plan[fmt::format("blk.{}.attn_q.weight", l)].to, DType::Q3_K) << l;
    EXPECT_EQ(plan[fmt::format("blk.{}.ffn_down.weight", l)].to, more ? DType::Q5_1 : DType::Q5_0) << l;
  }
  auto small = plan_by_name(f, recipe("q3_k_s"));
  EXPECT_EQ(small["blk.1.attn_v.weight"].to, DType::Q3_K);
  EXPECT_EQ(small["blk.1.ffn_down.weight"].to, DType::IQ4_NL);
  EXPECT_EQ(small["output.weight"].to, DType::Q6_K);
}

TEST(QuantizerPlan, TiedEmbeddingIsTreatedAsTheOutput) {
  TempPath path;
  write_model(path.str(), eight_layers(/*with_output=*/false));
  const GgufFile f = GgufFile::open(path.str());
  auto plan = plan_by_name(f, recipe("q4_0"));
  EXPECT_EQ(plan["token_embd.weight"].to, DType::Q6_K);
  EXPECT_THAT(plan["token_embd.weight"].why, HasSubstr("tied"));
  EXPECT_EQ(plan["blk.1.attn_q.weight"].to, DType::Q4_0);
}

TEST(QuantizerPlan, OverridesWinAndImpossibleOnesAreRefused) {
  TempPath path;
  write_model(path.str(), eight_layers(true));
  const GgufFile f = GgufFile::open(path.str());
  QuantizeOptions o = recipe("q4_0");
  o.overrides["blk.2.attn_q.weight"] = DType::Q8_0;
  EXPECT_EQ(plan_by_name(f, o)["blk.2.attn_q.weight"].to, DType::Q8_0);
  o.overrides["blk.2.ffn_down.weight"] = DType::Q6_K;  // 896 is not whole 256-blocks
  try {
    plan_quantization(f, o.recipe, o.overrides);
    FAIL() << "an override the row length cannot take was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("blk.2.ffn_down.weight cannot be q6_k"));
  }
}

// Every tensor of the output is the encoding of the dequantized input: with
// reference scales exactly quantize_row's bytes; by default the searched
// encoding of uniform importance, whose squared error is never larger.
TEST(Quantizer, WritesTheEncodingOfTheDequantizedInputAndCopiesMetadata) {
  TempPath in_path, reference_path, searched_path;
  auto tensors = eight_layers(true);
  tensors[1].type = DType::F16;  // mixed input types
  write_model(in_path.str(), tensors);
  const GgufFile in = GgufFile::open(in_path.str());
  QuantizeOptions o = recipe("q4_0");
  o.reference_scales = true;
  const QuantizeSummary s = quantize_gguf(in, reference_path.str(), o);
  quantize_gguf(in, searched_path.str(), recipe("q4_0"));
  const GgufFile reference = GgufFile::open(reference_path.str());
  const GgufFile searched = GgufFile::open(searched_path.str());
  EXPECT_EQ(reference.get_string("general.name", ""), "synthetic");
  EXPECT_EQ(reference.get_int("general.file_type", -1), 2);
  EXPECT_EQ(reference.get_int("general.quantization_version", -1), 2);
  ASSERT_EQ(reference.tensors().size(), in.tensors().size());
  std::uint64_t bytes = 0;
  int searched_better = 0;
  for (const TensorQuantPlan& p : plan_quantization(in, o.recipe, o.overrides)) {
    const GgufTensorInfo& src = *in.find_tensor(p.name);
    const GgufTensorInfo& ref = *reference.find_tensor(p.name);
    const GgufTensorInfo& found = *searched.find_tensor(p.name);
    ASSERT_EQ(ref.type, p.to) << p.name;
    ASSERT_EQ(found.type, p.to) << p.name;
    ASSERT_EQ(ref.shape, src.shape) << p.name;
    const std::int64_t cols = src.shape[0];
    std::vector<float> row(static_cast<std::size_t>(cols)), back(row.size()), ones(row.size(), 1.0f);
    std::vector<std::uint8_t> want(static_cast<std::size_t>(row_bytes(p.to, cols)));
    for (std::int64_t r = 0; r < src.rows(); ++r) {
      dequantize_row(src.type, src.data + r * row_bytes(src.type, cols), row.data(), cols);
      quantize_row(p.to, row.data(), want.data(), cols);
      ASSERT_EQ(std::memcmp(want.data(), ref.data + r * want.size(), want.size()), 0) << p.name << " row " << r;
      quantize_row_weighted(p.to, row.data(), ones.data(), want.data(), cols);
      ASSERT_EQ(std::memcmp(want.data(), found.data + r * want.size(), want.size()), 0) << p.name << " row " << r;
      auto error_of = [&](const std::uint8_t* encoded) {
        dequantize_row(p.to, encoded, back.data(), cols);
        double e = 0;
        for (std::int64_t c = 0; c < cols; ++c) e += std::pow(row[static_cast<std::size_t>(c)] - back[static_cast<std::size_t>(c)], 2);
        return e;
      };
      const double e_ref = error_of(ref.data + r * want.size()), e_found = error_of(found.data + r * want.size());
      ASSERT_LE(e_found, e_ref * (1 + 1e-6)) << p.name << " row " << r;
      searched_better += e_found < e_ref ? 1 : 0;
    }
    bytes += ref.size_bytes;
  }
  EXPECT_GT(searched_better, 0);
  EXPECT_EQ(s.output_bytes, bytes);
  EXPECT_EQ(s.requantized, 0);
  EXPECT_NEAR(s.bits_per_weight(), 8.0 * static_cast<double>(bytes) / static_cast<double>(s.parameters), 1e-9);
}

TEST(Quantizer, GridTypesAreWrittenWithTheirFileTypeAndFallBacks) {
  TempPath in_path;
  write_model(in_path.str(), eight_layers(true));
  const GgufFile in = GgufFile::open(in_path.str());
  for (const char* name : {"iq4_nl", "iq4_xs", "mxfp4", "nvfp4"}) {
    TempPath out_path;
    const QuantizeOptions o = recipe(name);
    quantize_gguf(in, out_path.str(), o);
    const GgufFile out = GgufFile::open(out_path.str());
    EXPECT_EQ(out.get_int("general.file_type", -1), static_cast<std::int64_t>(o.recipe.file_type)) << name;
    EXPECT_EQ(out.find_tensor("blk.0.attn_q.weight")->type, o.recipe.base) << name;
    EXPECT_EQ(out.find_tensor("output.weight")->type, DType::Q6_K) << name;  // the output keeps 6 bits
    // 896 is not whole 256-blocks: IQ4_XS falls back to IQ4_NL (NVFP4's 64 fit).
    EXPECT_EQ(out.find_tensor("blk.0.ffn_down.weight")->type,
              o.recipe.base == DType::IQ4_XS ? DType::IQ4_NL : o.recipe.base) << name;
    for (const char* tensor : {"blk.0.attn_q.weight", "blk.0.ffn_down.weight"}) {
      const GgufTensorInfo& src = *in.find_tensor(tensor);
      const GgufTensorInfo& q = *out.find_tensor(tensor);
      const std::int64_t cols = src.shape[0];
      std::vector<float> x(static_cast<std::size_t>(cols)), y(x.size());
      double error = 0, norm = 0;
      for (std::int64_t r = 0; r < src.rows(); ++r) {
        dequantize_row(src.type, src.data + r * row_bytes(src.type, cols), x.data(), cols);
        dequantize_row(q.type, q.data + r * row_bytes(q.type, cols), y.data(), cols);
        for (std::int64_t c = 0; c < cols; ++c) {
          error += std::pow(double(x[c]) - y[c], 2);
          norm += std::pow(double(x[c]), 2);
        }
      }
      EXPECT_LT(std::sqrt(error / norm), 0.15) << name << " " << tensor;
    }
  }
}

TEST(Quantizer, ImportanceChangesTheBlocksOnlyOfTheWeightsItCovers) {
  TempPath in_path, plain_path, weighted_path;
  write_model(in_path.str(), eight_layers(true));
  const GgufFile in = GgufFile::open(in_path.str());
  ImportanceMatrix importance;
  std::vector<float> skewed(256, 1.0f);
  for (int c = 0; c < 256; c += 16) skewed[static_cast<std::size_t>(c)] = 400.0f;
  importance.columns["blk.1.attn_q.weight"] = skewed;
  QuantizeOptions o = recipe("q4_0");
  quantize_gguf(in, plain_path.str(), o);
  o.importance = &importance;
  const QuantizeSummary s = quantize_gguf(in, weighted_path.str(), o);
  EXPECT_EQ(s.weighted, 1);
  const GgufFile plain = GgufFile::open(plain_path.str());
  const GgufFile weighted = GgufFile::open(weighted_path.str());
  for (const GgufTensorInfo& t : in.tensors()) {
    const GgufTensorInfo& a = *plain.find_tensor(t.name);
    const GgufTensorInfo& b = *weighted.find_tensor(t.name);
    const bool same = std::memcmp(a.data, b.data, a.size_bytes) == 0;
    EXPECT_EQ(same, t.name != "blk.1.attn_q.weight") << t.name;
  }
  // And the weighted error of the covered tensor is lower.
  const GgufTensorInfo& src = *in.find_tensor("blk.1.attn_q.weight");
  std::vector<float> x(256), ya(256), yb(256);
  double error_plain = 0, error_weighted = 0;
  for (std::int64_t r = 0; r < src.rows(); ++r) {
    dequantize_row(src.type, src.data + r * row_bytes(src.type, 256), x.data(), 256);
    dequantize_row(DType::Q4_0, plain.find_tensor(src.name)->data + r * row_bytes(DType::Q4_0, 256), ya.data(), 256);
    dequantize_row(DType::Q4_0, weighted.find_tensor(src.name)->data + r * row_bytes(DType::Q4_0, 256), yb.data(), 256);
    for (int c = 0; c < 256; ++c) {
      error_plain += skewed[static_cast<std::size_t>(c)] * std::pow(x[static_cast<std::size_t>(c)] - ya[static_cast<std::size_t>(c)], 2);
      error_weighted += skewed[static_cast<std::size_t>(c)] * std::pow(x[static_cast<std::size_t>(c)] - yb[static_cast<std::size_t>(c)], 2);
    }
  }
  EXPECT_LT(error_weighted, error_plain);
}

TEST(Quantizer, RefusesImportanceOfTheWrongWidth) {
  TempPath in_path, out_path;
  write_model(in_path.str(), eight_layers(true));
  const GgufFile in = GgufFile::open(in_path.str());
  ImportanceMatrix importance;
  importance.columns["blk.0.attn_q.weight"] = std::vector<float>(100, 1.0f);
  QuantizeOptions o = recipe("q8_0");
  o.importance = &importance;
  EXPECT_THROW(quantize_gguf(in, out_path.str(), o), Error);
  EXPECT_FALSE(std::filesystem::exists(out_path.str()));
}

}  // namespace
}  // namespace folio
