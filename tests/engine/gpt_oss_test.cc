// gpt-oss on its tiny random-weight checkpoints (tests/data/tiny/gpt_oss,
// MXFP4 experts as the released checkpoints store them, and gpt_oss_bf16,
// plain fused experts; scripts/make_family_models.py). Their logits against
// both references are family_model_test.cc's; here: the experts stay MXFP4
// in memory, repacked from the checkpoint's blocks and scales into exactly
// the bytes llama.cpp's converter writes; attention sinks and the expert
// biases are read and change the logits; and the engine over prompts longer
// than the 128-token window - batching, chunked prefill, prefix-cache hits
// and preemption change no greedy output (rule 5, ==).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"
#include "model/arch/gpt_oss_experts.h"
#include "model/arch/registry.h"
#include "model/hf_checkpoint.h"
#include "model/model_loader.h"
#include "support/engine_invariance.h"
#include "support/greedy_runner.h"
#include "support/reference_agreement.h"
#include "support/temp_path.h"
#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

using folio::testing::GreedyRunner;

using folio::testing::tiny_dir;

// The experts read from the Hugging Face directory are MXFP4 (never
// widened) and byte for byte the tensors llama.cpp's converter wrote into
// the GGUF file from the same blocks and scales; the dense parts keep their
// file types.
TEST(GptOss, Mxfp4ExpertsStayMxfp4AndMatchTheConvertersBytes) {
  const auto backend = folio::testing::make_test_backend(1, "f32");
  // Weights as read, before any backend repacks them.
  const auto checkpoint = HfCheckpoint::open(tiny_dir("gpt_oss"));
  const ArchEntry* arch = find_hf_arch("GptOssForCausalLM");
  ASSERT_NE(arch, nullptr);
  const Weights hf = hf_weights(checkpoint, *arch);
  const auto file = std::make_shared<const GgufFile>(GgufFile::open(tiny_dir("gpt_oss") + "/model.gguf"));
  const Weights gguf = Weights::from_gguf(file);
  int compared = 0;
  for (int l = 0; l < 4; ++l)
    for (const char* p : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
      const std::string name = "blk." + std::to_string(l) + "." + p + ".weight";
      const Tensor* a = hf.find(name);
      const Tensor* b = gguf.find(name);
      ASSERT_NE(a, nullptr) << name;
      ASSERT_NE(b, nullptr) << name;
      EXPECT_EQ(a->dtype, DType::MXFP4) << name;
      EXPECT_EQ(b->dtype, DType::MXFP4) << name;
      ASSERT_EQ(a->shape_string(), b->shape_string()) << name;
      ASSERT_EQ(a->bytes(), b->bytes()) << name;
      EXPECT_EQ(std::memcmp(a->data, b->data, a->bytes()), 0) << name << ": the repacked blocks differ";
      ++compared;
    }
  EXPECT_EQ(compared, 12);
  EXPECT_EQ(hf.find("blk.0.attn_q.weight")->dtype, DType::BF16);  // the checkpoint's type
  // Loaded on the backend, still 4.25 bits per expert weight.
  LoadedModel model = load_model(tiny_dir("gpt_oss"), *backend);
  EXPECT_EQ(model.weights->find("blk.0.ffn_down_exps.weight")->dtype, DType::MXFP4);
}

// One block by hand: element 2i of the checkpoint's byte i (low nibble) and
// 2i + 1 (high) become GGUF's element j (low nibble of byte j) and j + 16
// (high), the scale byte first.
TEST(GptOss, RepackingMovesEveryNibbleToItsGgufPlace) {
  std::uint8_t blocks[16], scale = 131, out[17];
  for (int i = 0; i < 16; ++i) blocks[i] = static_cast<std::uint8_t>((2 * i) % 16 | (((2 * i + 1) % 16) << 4));
  repack_mxfp4_row(blocks, &scale, 1, out);
  EXPECT_EQ(out[0], 131);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[1 + j] & 0x0F, j % 16) << j;          // element j
    EXPECT_EQ(out[1 + j] >> 4, (j + 16) % 16) << j;     // element j + 16
  }
}

// A checkpoint whose expert tensors are not gpt-oss's layout is refused
// with the tensor named, never read out of bounds.
TEST(GptOss, BrokenExpertTensorsAreRefusedClearly) {
  const std::string dir = folio::testing::TempPath("").str();
  std::filesystem::create_directory(dir);
  for (const auto& e : std::filesystem::directory_iterator(tiny_dir("gpt_oss")))
    if (e.path().filename() != "model.safetensors") std::filesystem::copy(e.path(), dir + "/" + e.path().filename().string());
  // model.safetensors with the first layer's down_proj scales cut to the wrong shape.
  const auto original = SafetensorsFile::open(tiny_dir("gpt_oss") + "/model.safetensors");
  nlohmann::json header = nlohmann::json::object();
  std::vector<std::uint8_t> data;
  for (const SafetensorsTensor& t : original.tensors()) {
    std::vector<std::int64_t> shape(t.shape.begin(), t.shape.begin() + t.num_dims);
    std::uint64_t bytes = t.size_bytes;
    if (t.name == "model.layers.0.mlp.experts.down_proj_scales") {
      shape[2] -= 1;
      bytes = bytes / static_cast<std::uint64_t>(t.shape[2]) * static_cast<std::uint64_t>(shape[2]);
    }
    header[t.name] = {{"dtype", std::string(name(t.stored))}, {"shape", shape},
                      {"data_offsets", {data.size(), data.size() + bytes}}};
    data.insert(data.end(), t.data, t.data + bytes);
  }
  const std::string h = header.dump();
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  const std::uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  out.close();
  const auto backend = folio::testing::make_test_backend(1, "f32");
  try {
    load_model(dir, *backend);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.experts.down_proj_scales"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected U8 [experts, out, in / 32]"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// The sinks and the biases are read and used: with a layer's sinks (or a
// bias) zeroed on the device, the logits move.
TEST(GptOss, SinksAndExpertBiasesChangeTheLogits) {
  const auto backend = folio::testing::make_test_backend(1, "f32");
  const std::vector<TokenId> ids = {5, 17, 99, 3, 250, 41, 8, 77, 120, 64};
  auto logits_of = [&](const char* zeroed) {
    LoadedModel model = load_model(tiny_dir("gpt_oss"), *backend);
    if (zeroed != nullptr) {
      const Tensor* t = model.weights->find(zeroed);
      EXPECT_NE(t, nullptr) << zeroed;
      std::vector<float> zeros(static_cast<std::size_t>(t->numel()), 0.0f);
      backend->copy_to_device(*t, zeros.data(), zeros.size() * sizeof(float));
    }
    GreedyRunner runner(*backend, model, 64, 1);
    return runner.teacher_forced(ids);
  };
  const std::vector<float> base = logits_of(nullptr);
  for (const char* t : {"blk.1.attn_sinks.weight", "blk.0.ffn_down_exps.bias", "blk.2.ffn_gate_inp.bias",
                        "blk.3.attn_output.bias"}) {
    const std::vector<float> moved = logits_of(t);
    double diff = 0;
    for (std::size_t i = 0; i < base.size(); ++i) diff = std::max(diff, static_cast<double>(std::abs(base[i] - moved[i])));
    EXPECT_GT(diff, 1e-3) << t << " changes nothing";
  }
}

class GptOssEngineTest : public ::testing::TestWithParam<const char*> {};

// Six prompts of 40 to 215 tokens: most cross the 128-token window, and
// their 24 generated tokens more; the 215-token one's 13 whole blocks are the
// prefix hit, past the window; 30 blocks cannot hold all six at once.
TEST_P(GptOssEngineTest, BatchingChunkingPrefixHitsAndPreemptionChangeNoGreedyOutput) {
  ModelSessionOptions o;
  o.backend = folio::testing::test_backend_options(2);
  o.model_path = tiny_dir("gpt_oss") + GetParam();
  folio::testing::InvarianceCase c;
  c.max_model_len = 512;
  c.max_num_batched_tokens = 512;
  c.num_blocks = 160;
  c.num_preempting_blocks = 30;
  c.chunk_sizes = {1, 7, 64};
  c.num_prompts = 6;
  c.first_prompt_len = 40;
  c.prompt_len_step = 35;
  folio::testing::expect_engine_invariance(open_model_session(o), c);
}

// The Hugging Face directory (MXFP4 experts repacked at load) and the GGUF
// file llama.cpp's converter made of it.
INSTANTIATE_TEST_SUITE_P(Tiny, GptOssEngineTest, ::testing::Values("", "/model.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param[0] == '\0' ? "HfDirectory" : "Gguf");
                         });

}  // namespace
}  // namespace folio
