// CapacityPlanner: the classic worked examples to the byte (OPT-13B,
// Llama-2-7B), every preset's KV size in every KV type (scales counted as the
// engine stores them), and the presets' parameter counts.
#include "kv/capacity_planner.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "kv/kv_storage.h"
#include "model/model_config.h"
#include "tensor/kv_dtype.h"

namespace folio {
namespace {

ModelShape preset(const char* name) {
  auto m = find_model_preset(name);
  EXPECT_TRUE(m.has_value()) << name;
  return m.value_or(ModelShape{});
}

NumberFormat kv(const char* name) { return kv_number_format(name).value(); }

const NumberFormat kF16{"f16", 1, 2};

// f16 weights, by default.
CapacityQuery query(const ModelShape& model, const NumberFormat& kv_format, const DeviceSpec& device) {
  CapacityQuery q;
  q.model = model;
  q.weight_bytes = weight_bytes(model, NumberFormat{"f16", 1, 2});
  q.kv_format = kv_format;
  q.device = device;
  return q;
}
const NumberFormat kQ4_0{"q4_0", 32, 18};
const NumberFormat kQ4_K{"q4_k", 256, 144};
const NumberFormat kQ8_0{"q8_0", 32, 34};

// The worked example of the vLLM paper: OPT-13B keeps 800 KB per token
// (2 x 40 layers x 5,120 hidden x 2 bytes), so 2,048 tokens take 1.6 GB.
TEST(CapacityPlanner, Opt13bWorkedExample) {
  const ModelShape m = preset("OPT-13B");
  EXPECT_EQ(kv_bytes_per_token(m, kv("f16")), 819'200);  // 800 KiB
  CapacityQuery q = query(m, kv("f16"), *find_device_preset("A100"));
  q.context_tokens = 2048;
  const CapacityPlan p = plan_capacity(q);
  EXPECT_EQ(p.kv_bytes_per_user, 1'677'721'600);  // 1,600 MiB
  EXPECT_EQ(p.weight_bytes, 25'706'946'560);      // 12.85 B params x 2 bytes
}

// The Llama-2-7B example: 512 KiB per token; 32 users at 4,096 tokens hold
// 64 GiB (about 69 GB) of KV, more than an 80 GB H100 has after the weights.
TEST(CapacityPlanner, Llama2_7bWorkedExample) {
  const ModelShape m = preset("Llama-2-7B");
  EXPECT_EQ(kv_bytes_per_token(m, kv("f16")), 524'288);
  CapacityQuery q = query(m, kv("f16"), *find_device_preset("H100"));
  q.context_tokens = 4096;
  q.num_users = 32;
  const CapacityPlan p = plan_capacity(q);
  EXPECT_EQ(p.kv_bytes_total, 68'719'476'736);  // 64 GiB = 68.7 GB
  EXPECT_EQ(p.weight_bytes, 13'476'831'232);
  EXPECT_EQ(p.reserve_bytes, 8'000'000'000);
  EXPECT_EQ(p.kv_budget_bytes, 80'000'000'000 - 8'000'000'000 - 13'476'831'232);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.needed_bytes, 13'476'831'232 + 68'719'476'736 + 8'000'000'000);
  EXPECT_EQ(p.max_users, 27);             // 58.5 GB / 2 GiB per user
  EXPECT_EQ(p.max_context_tokens, 3488);  // 58.5 GB / (32 x 512 KiB), whole blocks
  EXPECT_EQ(p.bytes_per_step, 13'476'831'232 + 68'719'476'736);
  EXPECT_NEAR(p.decode_tokens_per_s_per_user, 3.35e12 / 82'196'307'968.0, 1e-9);
  EXPECT_NEAR(p.decode_tokens_per_s_total, 32 * 3.35e12 / 82'196'307'968.0, 1e-6);

  q.device = *find_device_preset("H200");
  const CapacityPlan h200 = plan_capacity(q);
  EXPECT_TRUE(h200.fits);
  EXPECT_EQ(h200.max_users, (141'000'000'000 - 14'100'000'000 - 13'476'831'232) / 2'147'483'648);
}

TEST(CapacityPlanner, KvBytesPerTokenForEveryPresetAndFormat) {
  struct Row {
    const char* model;
    const char* format;
    std::int64_t bytes;
  };
  const Row rows[] = {
      {"Llama-2-7B", "f32", 1'048'576},        // 2 x 32 x 32 x 128 x 4
      {"Llama-2-7B", "bf16", 524'288},
      {"Llama-2-7B", "fp8", 266'240},          // 2 x 32 x 32 x (128 + 2 for the row's scale)
      {"Llama-2-7B", "q8_0", 278'528},         // 2 x 32 x 32 x (128 / 32 x 34)
      {"Llama-2-13B", "f16", 819'200},         // 2 x 40 x 40 x 128 x 2
      {"Llama-3-8B", "f16", 131'072},          // 2 x 32 x 8 x 128 x 2
      {"Llama-3-70B", "f16", 327'680},         // 2 x 80 x 8 x 128 x 2
      {"Mistral-7B", "f16", 131'072},
      {"Qwen2.5-7B", "f16", 57'344},           // 2 x 28 x 4 x 128 x 2
      {"Mixtral-8x7B", "f16", 131'072},
      {"DeepSeek-V3", "bf16", 70'272},         // 61 x (512 + 64) x 2, no factor 2
      {"DeepSeek-V3", "fp8_e4m3", 61 * (576 + 2)},
      {"DeepSeek-V3", "q8_0", 61 * 18 * 34},   // 576 = 18 blocks of 32
      {"Gemma-2-9B", "f16", 344'064},          // 2 x 42 x 8 x 256 x 2
      {"Gemma-2-27B", "f16", 376'832},         // 2 x 46 x 16 x 128 x 2
      {"Phi-4-mini", "f16", 131'072},          // 2 x 32 x 8 x 128 x 2
      {"Granite-3.1-8B", "f16", 163'840},      // 2 x 40 x 8 x 128 x 2
      {"SmolLM3-3B", "f16", 73'728},           // 2 x 36 x 4 x 128 x 2
      {"GLM-4-9B-0414", "f16", 40'960},        // 2 x 40 x 2 x 128 x 2
      {"Ministral-8B", "f16", 147'456},        // 2 x 36 x 8 x 128 x 2
      {"gpt-oss-20b", "f16", 49'152},          // 2 x 24 x 8 x 64 x 2
      {"gpt-oss-120b", "f16", 73'728},         // 2 x 36 x 8 x 64 x 2
  };
  for (const Row& r : rows) EXPECT_EQ(kv_bytes_per_token(preset(r.model), kv(r.format)), r.bytes) << r.model << " " << r.format;
}

// Layers of two shapes and layers that read another's cache (Gemma 4): only
// the writing layers' entries count, each with its own heads and sizes.
TEST(CapacityPlanner, KvBytesPerTokenCountsEachWritingLayerAsItIs) {
  ModelShape m;
  m.name = "two kinds";
  m.num_layers = 5;  // layers 3 and 4 read the caches of 1 and 2
  m.num_kv_heads = 2;
  m.head_dim = 32;
  m.kv_layers = {{2, 16, 16}, {2, 16, 16}, {1, 32, 32}};
  EXPECT_EQ(kv_bytes_per_token(m, kv("f16")), (2 * 32 + 2 * 32 + 1 * 64) * 2);
  EXPECT_EQ(kv_bytes_per_token(m, kv("q8_0")), 2 * 2 * 34 + 2 * 2 * 34 + 1 * 2 * 34);  // a block of 32 is 34 bytes
  m.kv_layers.clear();
  EXPECT_EQ(kv_bytes_per_token(m, kv("f16")), 5 * 2 * 64 * 2);
}

TEST(CapacityPlanner, WeightBytesInWholeBlocks) {
  const ModelShape m = preset("Llama-2-7B");
  EXPECT_EQ(weight_bytes(m, kF16), 13'476'831'232);
  EXPECT_EQ(weight_bytes(m, kQ8_0), 6'738'415'616 / 32 * 34);  // a multiple of 32
  EXPECT_EQ(weight_bytes(m, kQ4_0), 3'790'358'784);            // 4.5 bits
  EXPECT_EQ(weight_bytes(m, kQ4_K), (6'738'415'616 + 255) / 256 * 144);
  EXPECT_DOUBLE_EQ(kQ4_K.bits_per_number(), 4.5);
  EXPECT_DOUBLE_EQ(kQ8_0.bits_per_number(), 8.5);
}

TEST(CapacityPlanner, EveryListedWeightFormatIsKnown) {
  for (const std::string& name : weight_number_format_names())
    EXPECT_TRUE(weight_number_format(name).has_value()) << name;
  // The 4-bit grid types: 4.5, 4.25, 4.25 and 4.5 bits per weight.
  EXPECT_DOUBLE_EQ(weight_number_format("iq4_nl")->bits_per_number(), 4.5);
  EXPECT_DOUBLE_EQ(weight_number_format("iq4_xs")->bits_per_number(), 4.25);
  EXPECT_DOUBLE_EQ(weight_number_format("mxfp4")->bits_per_number(), 4.25);
  EXPECT_DOUBLE_EQ(weight_number_format("nvfp4")->bits_per_number(), 4.5);
  // Hugging Face checkpoints' FP8 and bitsandbytes NF4, their scales included.
  EXPECT_DOUBLE_EQ(weight_number_format("fp8")->bits_per_number(), 8.0);
  EXPECT_NEAR(weight_number_format("fp8_block128")->bits_per_number(), 8.002, 5e-4);
  EXPECT_DOUBLE_EQ(weight_number_format("nf4")->bits_per_number(), 4.5);
  EXPECT_NEAR(weight_number_format("nf4-dq")->bits_per_number(), 4.127, 5e-4);
}

// The preset parameter counts follow from the published shapes.
TEST(CapacityPlanner, PresetParameterCountsMatchTheirShapes) {
  // vocab, hidden, ffn, layers, heads, kv heads, experts, qkv bias
  auto llama = [](std::int64_t v, std::int64_t h, std::int64_t f, std::int64_t l, std::int64_t kvh,
                  std::int64_t experts, bool bias) {
    const std::int64_t kv_dim = kvh * 128;
    std::int64_t attn = 2 * h * h + 2 * h * kv_dim + (bias ? h + 2 * kv_dim : 0);
    std::int64_t mlp = 3 * h * f * (experts ? experts : 1) + (experts ? h * experts : 0);
    return l * (attn + mlp + 2 * h) + 2 * v * h + h;
  };
  EXPECT_EQ(preset("Llama-2-7B").num_params, llama(32000, 4096, 11008, 32, 32, 0, false));
  EXPECT_EQ(preset("Llama-2-13B").num_params, llama(32000, 5120, 13824, 40, 40, 0, false));
  EXPECT_EQ(preset("Llama-3-8B").num_params, llama(128256, 4096, 14336, 32, 8, 0, false));
  EXPECT_EQ(preset("Llama-3-70B").num_params, llama(128256, 8192, 28672, 80, 8, 0, false));
  EXPECT_EQ(preset("Mistral-7B").num_params, llama(32000, 4096, 14336, 32, 8, 0, false));
  EXPECT_EQ(preset("Qwen2.5-7B").num_params, llama(152064, 3584, 18944, 28, 4, 0, true));
  EXPECT_EQ(preset("Mixtral-8x7B").num_params, llama(32000, 4096, 14336, 32, 8, 8, false));
  // Tied embeddings and other head sizes: SmolLM2-135M and the small Qwen2.5s.
  auto tied = [](std::int64_t v, std::int64_t h, std::int64_t f, std::int64_t l, std::int64_t heads, std::int64_t kvh,
                 std::int64_t hd, bool bias) {
    const std::int64_t q = heads * hd, kv = kvh * hd;
    const std::int64_t attn = 2 * h * q + 2 * h * kv + (bias ? q + 2 * kv : 0);
    return l * (attn + 3 * h * f + 2 * h) + v * h + h;
  };
  EXPECT_EQ(preset("SmolLM2-135M").num_params, tied(49152, 576, 1536, 30, 9, 3, 64, false));
  EXPECT_EQ(preset("Qwen2.5-0.5B").num_params, tied(151936, 896, 4864, 24, 14, 2, 64, true));
  EXPECT_EQ(preset("Qwen2.5-1.5B").num_params, tied(151936, 1536, 8960, 28, 12, 2, 128, true));
  // OPT: biases everywhere, LayerNorm with bias, GELU MLP of two matrices,
  // 2,048 + 2 learned positions, tied embeddings.
  const std::int64_t h = 5120, f = 20480;
  const std::int64_t opt_layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 4 * h;
  EXPECT_EQ(preset("OPT-13B").num_params, 40 * opt_layer + 50272 * h + 2050 * h + 2 * h);
  // DeepSeek-V3: MLA attention, 3 dense layers, 58 MoE layers of 256 routed
  // experts plus one shared, untied embeddings (the MTP module excluded).
  const std::int64_t d = 7168;
  const std::int64_t mla = d * 1536 + 1536 + 1536 * 128 * 192 + d * 576 + 512 + 512 * 128 * 256 + 128 * 128 * d;
  const std::int64_t dense_layer = mla + 2 * d + 3 * d * 18432;
  const std::int64_t moe_layer = mla + 2 * d + 257 * 3 * d * 2048 + 256 * d + 256;
  EXPECT_EQ(preset("DeepSeek-V3").num_params, 3 * dense_layer + 58 * moe_layer + 2 * 129280 * d + d);
  // The families of issue 39: vocab, hidden, ffn, layers, heads, kv heads,
  // head size, norms per layer (Gemma 2 and GLM-4 norm after attention and
  // the FFN too), Q/K/V biases, tied embeddings.
  auto family = [](std::int64_t v, std::int64_t hidden, std::int64_t ffn, std::int64_t l, std::int64_t heads,
                   std::int64_t kvh, std::int64_t hd, std::int64_t norms, bool bias, bool tie) {
    const std::int64_t q = heads * hd, kv = kvh * hd;
    const std::int64_t attn = 2 * hidden * q + 2 * hidden * kv + (bias ? q + 2 * kv : 0);
    return l * (attn + 3 * hidden * ffn + norms * hidden) + (tie ? 1 : 2) * v * hidden + hidden;
  };
  EXPECT_EQ(preset("Gemma-2-9B").num_params, family(256000, 3584, 14336, 42, 16, 8, 256, 4, false, true));
  EXPECT_EQ(preset("Gemma-2-27B").num_params, family(256000, 4608, 36864, 46, 32, 16, 128, 4, false, true));
  EXPECT_EQ(preset("Phi-4-mini").num_params, family(200064, 3072, 8192, 32, 24, 8, 128, 2, false, true));
  EXPECT_EQ(preset("Granite-3.1-8B").num_params, family(49155, 4096, 12800, 40, 32, 8, 128, 2, false, true));
  EXPECT_EQ(preset("SmolLM3-3B").num_params, family(128256, 2048, 11008, 36, 16, 4, 128, 2, false, true));
  EXPECT_EQ(preset("GLM-4-9B-0414").num_params, family(151552, 4096, 13696, 40, 32, 2, 128, 4, true, false));
  EXPECT_EQ(preset("Ministral-8B").num_params, family(131072, 4096, 12288, 36, 32, 8, 128, 2, false, false));
  // gpt-oss: hidden 2880, 64 query heads and 8 KV heads of 64, biases on
  // Q/K/V/O, a sink per head, a router with a bias, experts of 2880 with
  // biases on gate_up and down, untied embeddings of 201,088 tokens (the
  // published 20.91B and 116.83B).
  auto gpt_oss = [](std::int64_t layers, std::int64_t experts) {
    const std::int64_t hidden = 2880, q = 64 * 64, kv = 8 * 64, ffn = 2880;
    const std::int64_t attn = 2 * hidden * q + 2 * hidden * kv + (q + 2 * kv + hidden) + 64;  // + biases, sinks
    const std::int64_t moe = experts * (hidden + 1) + experts * (3 * ffn * hidden + 2 * ffn + hidden);
    return layers * (attn + moe + 2 * hidden) + 2 * 201088 * hidden + hidden;
  };
  EXPECT_EQ(preset("gpt-oss-20b").num_params, gpt_oss(24, 32));
  EXPECT_EQ(preset("gpt-oss-120b").num_params, gpt_oss(36, 128));
}

TEST(CapacityPlanner, FindsPresetsLoosely) {
  EXPECT_EQ(preset("llama-2-7b").name, "Llama-2-7B");
  EXPECT_EQ(preset("LLAMA 2 7B").name, "Llama-2-7B");
  EXPECT_EQ(preset("qwen2.5_7b").name, "Qwen2.5-7B");
  EXPECT_FALSE(find_model_preset("Llama-9-1B"));
  EXPECT_EQ(find_device_preset("rtx 4090")->memory_bytes, 24'000'000'000);
  EXPECT_EQ(find_device_preset("4090")->name, "RTX-4090");
  EXPECT_DOUBLE_EQ(find_device_preset("h200")->bandwidth_bytes_per_s, 4.8e12);
  EXPECT_FALSE(find_device_preset("TPU"));
  EXPECT_FALSE(kv_number_format("q4_0"));
  EXPECT_EQ(kv_number_format("FP8")->block_bytes, 1);
  EXPECT_EQ(kv_number_format("FP8")->row_scale_bytes, 2);
  EXPECT_EQ(kv_number_format("fp8")->name, "fp8_e4m3");
}

TEST(CapacityPlanner, RoundsContextToWholeBlocks) {
  CapacityQuery q = query(preset("Llama-2-7B"), kF16, {"x", 100'000'000'000, 1e12});
  q.context_tokens = 1000;  // 63 blocks of 16 = 1,008 slots
  q.reserve_fraction = 0;
  const CapacityPlan p = plan_capacity(q);
  EXPECT_EQ(p.tokens_per_user, 1008);
  EXPECT_EQ(p.kv_bytes_per_user, 1008 * 524'288);
  EXPECT_EQ(p.max_context_tokens % 16, 0);
  q.reserve_bytes = 90'000'000'000;  // the weights no longer fit
  const CapacityPlan none = plan_capacity(q);
  EXPECT_LT(none.kv_budget_bytes, 0);
  EXPECT_EQ(none.max_users, 0);
  EXPECT_EQ(none.max_context_tokens, 0);
  EXPECT_FALSE(none.fits);
}

TEST(CapacityPlanner, BadInputsSayWhatToChange) {
  CapacityQuery q = query(preset("Llama-2-7B"), kF16, {"x", 1'000, 1});
  q.num_users = 0;
  EXPECT_THROW(plan_capacity(q), Error);
  q.num_users = 1;
  q.context_tokens = 0;
  EXPECT_THROW(plan_capacity(q), Error);
  q.context_tokens = 1;
  q.reserve_fraction = 1.5;
  EXPECT_THROW(plan_capacity(q), Error);
}

// q8_0 keeps 34 bytes per 32 numbers (32 int8 codes and an f16 scale), so
// a fixed KV budget holds 64 / 34 = 1.88x the users of f16.
TEST(CapacityPlanner, Q8_0KvHoldsAbout1_88TimesTheUsersOfF16) {
  const ModelShape m = preset("Llama-3-8B");
  EXPECT_EQ(kv_bytes_per_token(m, kv("q8_0")), 2 * 32 * 8 * (128 / 32 * 34));
  CapacityQuery q = query(m, kv("f16"), {"x", 80'000'000'000, 1e12});
  q.context_tokens = 2048;
  const CapacityPlan f16 = plan_capacity(q);
  q.kv_format = kv("q8_0");
  const CapacityPlan q8 = plan_capacity(q);
  q.kv_format = kv("fp8_e4m3");
  const CapacityPlan fp8 = plan_capacity(q);
  EXPECT_EQ(q8.kv_bytes_per_user, 2048 * 2 * 32 * 8 * 136);
  EXPECT_EQ(q8.max_users, f16.kv_budget_bytes / (2048LL * 2 * 32 * 8 * 136));
  EXPECT_NEAR(static_cast<double>(q8.max_users) / static_cast<double>(f16.max_users), 64.0 / 34.0, 0.02);
  EXPECT_NEAR(static_cast<double>(fp8.max_users) / static_cast<double>(f16.max_users), 256.0 / 130.0, 0.02);
  // Keys and values apart: q8_0 keys, f16 values.
  q.kv_format = kv("q8_0");
  q.v_format = kF16;
  EXPECT_EQ(plan_capacity(q).kv_bytes_per_token, 32 * 8 * (136 + 256));
}

// The planner counts exactly the bytes the engine's KV storage allocates per
// block, scales included, for every KV type and for K and V apart.
TEST(CapacityPlanner, CountsTheBytesKvStorageAllocates) {
  ModelConfig c;
  c.num_layers = 30;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.value_head_dim = 64;
  ModelShape m;
  m.num_layers = 30;
  m.num_kv_heads = 3;
  m.head_dim = 64;
  ReferenceBackend backend;
  for (const std::string& k : kv_dtype_names()) {
    for (const std::string& v : kv_dtype_names()) {
      const KvCacheDType type(*parse_kv_dtype(k), *parse_kv_dtype(v));
      const std::uint64_t block = KvStorage::block_bytes(c, 16, type);
      EXPECT_EQ(static_cast<std::int64_t>(block), 16 * kv_bytes_per_token(m, kv(k.c_str()), kv(v.c_str())))
          << type.name();
      // What it allocates from a budget stays within it, alignment included,
      // and wastes less than a block (and the alignment).
      KvStorageOptions o;
      o.dtype = type;
      o.budget_bytes = 3'000'000;
      const KvStorage storage(backend, c, o);
      EXPECT_LE(storage.total_bytes(), o.budget_bytes) << type.name();
      EXPECT_GT(storage.total_bytes() + block + 30 * 4 * 64, o.budget_bytes) << type.name();
    }
  }
}

TEST(CapacityPlanner, ParsesSizesAndBandwidths) {
  EXPECT_EQ(parse_byte_size("80GB"), 80'000'000'000);
  EXPECT_EQ(parse_byte_size("141 GB"), 141'000'000'000);
  EXPECT_EQ(parse_byte_size("24GiB"), 24LL << 30);
  EXPECT_EQ(parse_byte_size("512 KiB"), 524'288);
  EXPECT_EQ(parse_byte_size("1.5e9B"), 1'500'000'000);
  EXPECT_EQ(parse_byte_size("80"), std::nullopt);  // a unit is required
  EXPECT_EQ(parse_byte_size("80GB/s"), std::nullopt);
  EXPECT_EQ(parse_byte_size("GB"), std::nullopt);
  EXPECT_EQ(parse_byte_size("-1GB"), std::nullopt);
  EXPECT_DOUBLE_EQ(parse_bandwidth("3.35TB/s").value(), 3.35e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("900 GB/s").value(), 9e11);
  EXPECT_DOUBLE_EQ(parse_bandwidth("2TB").value(), 2e12);
  EXPECT_EQ(parse_bandwidth("fast"), std::nullopt);
}

// A load whose KV cache would pass 2^60 bytes is refused, not wrapped.
TEST(CapacityPlanner, RefusesAKvCacheThatWouldOverflow) {
  CapacityQuery q = query(preset("Llama-2-13B"), kv("f32"), *find_device_preset("H100"));
  q.context_tokens = std::int64_t{1} << 30;
  q.num_users = std::int64_t{1} << 20;
  EXPECT_THROW(plan_capacity(q), Error);
  q.num_users = std::int64_t{1} << 40;
  q.context_tokens = std::int64_t{1} << 40;
  EXPECT_THROW(plan_capacity(q), Error);
}

}  // namespace
}  // namespace folio
