// Quantized Hugging Face checkpoints: FP8 weights widened with their per-tensor,
// per-channel and 128x128 block scales, bitsandbytes NF4 (with and without
// double quantization) widened bit for bit as bitsandbytes dequantizes it, the
// bits per weight they cost, and damaged ones (a scale missing or of the wrong
// shape, an unknown quant_method, a broken quant state) refused with an Error
// that names the tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arch/registry.h"
#include "model/hf_checkpoint.h"
#include "model/hf_quantization.h"
#include "model/weights.h"
#include "support/test_models.h"
#include "tensor/fp8.h"
#include "tensor/half.h"

namespace folio {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string tiny_dir(const std::string& name) { return folio::testing::source_path("tests/data/tiny/" + name); }

// One tensor of a safetensors file to write.
struct Entry {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

std::vector<Entry> entries_of(const std::string& path) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  std::vector<Entry> out;
  for (const SafetensorsTensor& t : f.tensors()) {
    Entry e{t.name, std::string(name(t.stored)), {}, std::vector<std::uint8_t>(t.data, t.data + t.size_bytes)};
    for (int d = 0; d < t.num_dims; ++d) e.shape.push_back(t.shape[d]);
    out.push_back(std::move(e));
  }
  return out;
}

void write_safetensors(const fs::path& path, const std::vector<Entry>& entries) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const Entry& e : entries) {
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << text;
  for (const Entry& e : entries)
    out.write(reinterpret_cast<const char*>(e.bytes.data()), static_cast<std::streamsize>(e.bytes.size()));
}

// A copy of a tiny quantized checkpoint in a temporary directory, to damage.
class DamagedCheckpoint : public ::testing::Test {
 protected:
  void copy_of(const std::string& name) {
    dir_ = fs::temp_directory_path() /
           fmt::format("folio_quant_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* file : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(fs::path(tiny_dir(name)) / file, dir_ / file);
    entries_ = entries_of((dir_ / "model.safetensors").string());
    config_ = read_json_object((dir_ / "config.json").string());
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  Entry& entry(const std::string& name) {
    for (Entry& e : entries_)
      if (e.name == name) return e;
    ADD_FAILURE() << "no tensor " << name;
    return entries_.front();
  }
  void drop(const std::string& name) {
    std::erase_if(entries_, [&](const Entry& e) { return e.name == name; });
  }
  // Writes the damaged files back, opens the checkpoint and maps its
  // weights; the error, or "accepted".
  std::string error_of(const char* model_class) {
    write_safetensors(dir_ / "model.safetensors", entries_);
    std::ofstream(dir_ / "config.json") << config_.dump();
    try {
      const auto c = HfCheckpoint::open(dir_.string());
      hf_weights(c, *find_hf_arch(model_class));
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  }

  fs::path dir_;
  std::vector<Entry> entries_;
  nlohmann::json config_;
};

constexpr const char* kQwen3 = "Qwen3ForCausalLM";
constexpr const char* kLlama = "LlamaForCausalLM";
const std::string kQ = "model.layers.0.self_attn.q_proj.weight";
const std::string kK = "model.layers.0.self_attn.k_proj.weight";

TEST(HfQuantization, ReadsTheQuantizationConfigs) {
  const auto block = HfCheckpoint::open(tiny_dir("qwen3_fp8_block"));
  EXPECT_EQ(block->quantization().method, HfQuantMethod::kFp8);
  EXPECT_EQ(block->quantization().describe(), "fp8 128x128 blocks");
  EXPECT_EQ(HfCheckpoint::open(tiny_dir("qwen3_fp8_tensor"))->quantization().describe(), "fp8 per tensor");
  EXPECT_EQ(HfCheckpoint::open(tiny_dir("qwen3_fp8_channel"))->quantization().describe(), "fp8 per channel");
  EXPECT_EQ(HfCheckpoint::open(tiny_dir("llama_nf4"))->quantization().method, HfQuantMethod::kBitsandbytes4bit);
  EXPECT_EQ(HfCheckpoint::open(tiny_dir("qwen3"))->quantization().method, HfQuantMethod::kNone);
}

// Every FP8 weight, widened, is code * scale of its block rounded to BF16,
// the partial blocks at the right and bottom edges included.
TEST(HfQuantization, Fp8WeightsWidenWithTheirBlockScales) {
  for (const char* name : {"qwen3_fp8_block", "qwen3_fp8_tensor", "qwen3_fp8_channel"}) {
    const auto c = HfCheckpoint::open(tiny_dir(name));
    const HfQuantization& q = c->quantization();
    for (const std::string& weight : {kQ, std::string("model.layers.0.mlp.down_proj.weight")}) {
      const SafetensorsTensor& t = *c->find_tensor(weight);
      ASSERT_EQ(t.stored, SafetensorsDtype::F8_E4M3);
      const WidenedWeight w = widen_weight(*c, t);
      ASSERT_EQ(w.view.dtype, DType::BF16);
      const std::int64_t rows = t.shape[0], cols = t.shape[1];
      ASSERT_EQ(w.view.shape_string(), fmt::format("[{}, {}]", rows, cols));
      const std::string scale_name =
          weight.substr(0, weight.size() - 6) + (q.fp8_scale_suffix.empty() ? "" : q.fp8_scale_suffix);
      const SafetensorsTensor& s = *c->find_tensor(scale_name);
      std::vector<float> scales(static_cast<std::size_t>(s.num_elements));
      for (std::int64_t i = 0; i < s.num_elements; ++i)
        scales[static_cast<std::size_t>(i)] = s.dtype == DType::F32 ? reinterpret_cast<const float*>(s.data)[i]
                                                                    : bf16_to_f32(reinterpret_cast<const std::uint16_t*>(s.data)[i]);
      const auto* out = static_cast<const std::uint16_t*>(w.view.data);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t k = 0; k < cols; ++k) {
          float scale = scales[0];
          if (q.fp8_scales == Fp8Scales::kPerChannel) scale = scales[static_cast<std::size_t>(r)];
          if (q.fp8_scales == Fp8Scales::kBlock)
            scale = scales[static_cast<std::size_t>((r / 128) * s.shape[1] + k / 128)];
          const float want = fp8_e4m3_to_f32(t.data[r * cols + k]) * scale;
          ASSERT_EQ(out[r * cols + k], f32_to_bf16(want)) << name << " " << weight << " [" << r << ", " << k << "]";
        }
      }
    }
  }
}

// folio's NF4 numbers are bitsandbytes' own: bnb_dequantized.bin holds
// bitsandbytes.functional.dequantize_4bit of one weight, run on the CPU.
TEST(HfQuantization, Nf4WidensBitForBitAsBitsandbytes) {
  for (const auto& [name, dtype] : {std::pair{"llama_nf4", DType::F16}, std::pair{"llama_nf4_dq", DType::BF16}}) {
    const auto c = HfCheckpoint::open(tiny_dir(name));
    const WidenedWeight w = widen_weight(*c, *c->find_tensor(kK));
    EXPECT_EQ(w.view.dtype, dtype) << name;
    EXPECT_EQ(w.view.shape_string(), "[64, 160]");
    std::ifstream in(tiny_dir(name) + "/bnb_dequantized.bin", std::ios::binary);
    const std::vector<char> want{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    ASSERT_EQ(want.size(), w.view.bytes()) << name;
    EXPECT_EQ(std::memcmp(want.data(), w.view.data, want.size()), 0) << name;
  }
}

TEST(HfQuantization, Nf4CodeIsThePublishedTable) {
  EXPECT_EQ(kNf4Code[0], -1.0f);
  EXPECT_EQ(kNf4Code[7], 0.0f);
  EXPECT_EQ(kNf4Code[15], 1.0f);
  for (int i = 1; i < 16; ++i) EXPECT_LT(kNf4Code[i - 1], kNf4Code[i]);
}

TEST(HfQuantization, BitsPerWeightCountTheScales) {
  struct Want {
    const char* dir;
    const char* format;
    double low, high;
  };
  for (const Want& want : {Want{"qwen3_fp8_block", "fp8 128x128 blocks", 8.0, 8.01},
                           Want{"qwen3_fp8_tensor", "fp8 per tensor", 8.0, 8.002},
                           Want{"qwen3_fp8_channel", "fp8 per channel", 8.0, 8.11},
                           Want{"llama_nf4", "nf4", 4.5, 4.62},
                           // The nested code (256 f32) is a fifth of a bit on a tensor this small.
                           Want{"llama_nf4_dq", "nf4 double quant", 4.12, 4.40}}) {
    const auto c = HfCheckpoint::open(tiny_dir(want.dir));
    const QuantizedWeightSize s = quantized_weight_size(*c, *c->find_tensor("model.layers.0.mlp.up_proj.weight"));
    EXPECT_EQ(s.format, want.format);
    EXPECT_EQ(s.num_elements, 288 * 160);
    const double bits = 8.0 * static_cast<double>(s.bytes) / static_cast<double>(s.num_elements);
    std::printf("[%s] %s: %.4f bits per weight\n", want.dir, want.format, bits);
    EXPECT_GE(bits, want.low) << want.dir;
    EXPECT_LE(bits, want.high) << want.dir;
  }
}

TEST(HfQuantization, WeightsMapOntoTheArchitectureWidened) {
  const auto c = HfCheckpoint::open(tiny_dir("qwen3_fp8_block"));
  const Weights w = hf_weights(c, *find_hf_arch(kQwen3));
  EXPECT_EQ(w.find("blk.0.attn_q.weight")->dtype, DType::BF16);
  EXPECT_EQ(w.find("blk.0.ffn_down.weight")->shape_string(), "[160, 288]");
  EXPECT_EQ(w.find("blk.0.attn_q.weight_scale_inv"), nullptr);
  const auto n = HfCheckpoint::open(tiny_dir("llama_nf4_dq"));
  EXPECT_EQ(hf_weights(n, *find_hf_arch(kLlama)).find("blk.0.ffn_up.weight")->dtype, DType::BF16);
}

TEST_F(DamagedCheckpoint, MissingFp8ScaleIsNamed) {
  copy_of("qwen3_fp8_block");
  drop("model.layers.0.self_attn.q_proj.weight_scale_inv");
  const std::string e = error_of(kQwen3);
  EXPECT_THAT(e, HasSubstr(kQ + " has no scale tensor model.layers.0.self_attn.q_proj.weight_scale_inv"));
}

TEST_F(DamagedCheckpoint, Fp8ScaleOfTheWrongShapeIsNamed) {
  copy_of("qwen3_fp8_block");
  Entry& s = entry("model.layers.0.mlp.down_proj.weight_scale_inv");  // [2, 3] for [160, 288]
  s.shape = {3, 2};
  EXPECT_THAT(error_of(kQwen3),
              HasSubstr("down_proj.weight_scale_inv has shape [3, 2], but weight model.layers.0.mlp.down_proj.weight "
                        "of shape [160, 288] with fp8 128x128 blocks needs [2, 3]"));
  s.shape = {6};
  EXPECT_THAT(error_of(kQwen3), HasSubstr("has shape [6], but"));
}

TEST_F(DamagedCheckpoint, Fp8ScaleOfTheWrongTypeIsNamed) {
  copy_of("qwen3_fp8_tensor");
  Entry& s = entry("model.layers.0.self_attn.q_proj.weight_scale_inv");
  s.dtype = "U8";
  s.shape = {4};
  EXPECT_THAT(error_of(kQwen3), HasSubstr("(scale of " + kQ + ") has dtype U8; it must be F32, F16 or BF16"));
}

TEST_F(DamagedCheckpoint, PerChannelScalesMustCoverEveryRow) {
  copy_of("qwen3_fp8_channel");
  Entry& s = entry("model.layers.0.self_attn.k_proj.weight_scale");  // [64, 1]
  s.shape = {32, 2};
  EXPECT_THAT(error_of(kQwen3), HasSubstr("with fp8 per channel needs [64, 1]"));
}

// fbgemm_fp8 stores the same per-row weight_scale as compressed-tensors'
// channel strategy; a compressed-tensors block strategy reads its block_structure.
TEST_F(DamagedCheckpoint, OtherFp8ConfigsOfTheSameScalesAreRead) {
  copy_of("qwen3_fp8_channel");
  config_["quantization_config"] = {{"quant_method", "fbgemm_fp8"}, {"activation_scale_ub", 1200.0}};
  EXPECT_EQ(error_of(kQwen3), "accepted");
  copy_of("qwen3_fp8_block");
  for (Entry& e : entries_)
    if (e.name.ends_with(".weight_scale_inv")) e.name.replace(e.name.size() - 4, 4, "");  // -> weight_scale
  config_["quantization_config"] = nlohmann::json::parse(R"({"quant_method": "compressed-tensors",
      "format": "float-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}}}})");
  EXPECT_EQ(error_of(kQwen3), "accepted");
  config_["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = "group";
  EXPECT_THAT(error_of(kQwen3), HasSubstr("weight strategy \"group\" is not read"));
  config_["quantization_config"]["format"] = "pack-quantized";
  EXPECT_THAT(error_of(kQwen3), HasSubstr("has format \"pack-quantized\"; folio reads float-quantized"));
}

TEST_F(DamagedCheckpoint, UnknownQuantMethodIsRefused) {
  copy_of("qwen3_fp8_block");
  config_["quantization_config"]["quant_method"] = "gptq";
  EXPECT_THAT(error_of(kQwen3), HasSubstr("quant_method \"gptq\" is not read; folio reads fp8, fbgemm_fp8"));
  config_["quantization_config"] = {{"bits", 4}};
  EXPECT_THAT(error_of(kQwen3), HasSubstr("has no quant_method string"));
  config_["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 0}}};
  EXPECT_THAT(error_of(kQwen3), HasSubstr("weight_block_size is [128,0]; each count must be in"));
  config_["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}};
  EXPECT_THAT(error_of(kQwen3), HasSubstr("load_in_8bit (LLM.int8) is not read"));
}

TEST_F(DamagedCheckpoint, Fp8WithoutAQuantizationConfigIsRefused) {
  copy_of("qwen3_fp8_block");
  config_.erase("quantization_config");
  EXPECT_THAT(error_of(kQwen3), HasSubstr("is F8_E4M3 but config.json has no FP8 quantization_config"));
}

TEST_F(DamagedCheckpoint, BadQuantStateIsRefused) {
  copy_of("llama_nf4");
  Entry& state = entry(kK + ".quant_state.bitsandbytes__nf4");
  const std::string json(state.bytes.begin(), state.bytes.end());
  auto set = [&](const std::string& text) {
    state.bytes.assign(text.begin(), text.end());
    state.shape = {static_cast<std::int64_t>(text.size())};
  };
  set("{\"quant_type\": \"nf4\", ");
  EXPECT_THAT(error_of(kLlama), HasSubstr("bitsandbytes__nf4 is not a well-formed JSON object"));
  nlohmann::json j = nlohmann::json::parse(json);
  j["blocksize"] = -64;
  set(j.dump());
  EXPECT_THAT(error_of(kLlama), HasSubstr("blocksize is -64; expected a count"));
  j = nlohmann::json::parse(json);
  j["shape"] = {64, 161};
  set(j.dump());
  EXPECT_THAT(error_of(kLlama), HasSubstr("holds 5120 bytes, but its quant state's shape [64, 161] needs 5152"));
  j = nlohmann::json::parse(json);
  j["dtype"] = "float64";
  set(j.dump());
  EXPECT_THAT(error_of(kLlama), HasSubstr("dtype \"float64\" is not read"));
  j = nlohmann::json::parse(json);
  j["quant_type"] = "int4";
  set(j.dump());
  EXPECT_THAT(error_of(kLlama), HasSubstr("quant_type is \"int4\""));
}

TEST_F(DamagedCheckpoint, MissingOrShortAbsmaxIsNamed) {
  copy_of("llama_nf4_dq");
  drop(kK + ".nested_absmax");
  EXPECT_THAT(error_of(kLlama), HasSubstr("has no nested absmax tensor " + kK + ".nested_absmax"));
  copy_of("llama_nf4");
  Entry& absmax = entry(kK + ".absmax");
  absmax.bytes.resize(absmax.bytes.size() - 4);
  absmax.shape = {absmax.shape[0] - 1};
  EXPECT_THAT(error_of(kLlama), HasSubstr("(absmax of " + kK + ") has shape [159], 159 numbers; 160 are needed"));
  copy_of("llama_nf4");
  drop(kK + ".quant_state.bitsandbytes__nf4");
  EXPECT_THAT(error_of(kLlama), HasSubstr("has no quant state"));
}

TEST_F(DamagedCheckpoint, WrongQuantMapIsRefused) {
  copy_of("llama_nf4");
  Entry& map = entry(kK + ".quant_map");
  map.bytes[0] ^= 1;
  EXPECT_THAT(error_of(kLlama), HasSubstr(".quant_map is not the NF4 code of bitsandbytes"));
}

}  // namespace
}  // namespace folio
