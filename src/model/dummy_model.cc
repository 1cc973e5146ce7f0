#include "model/dummy_model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/loose_name.h"
#include "model/arch/registry.h"
#include "model/quant_plan.h"
#include "tensor/half.h"

namespace folio {
namespace {

struct Shape {
  const char* name;
  // llama (normal RoPE), qwen2 (NeoX RoPE, Q/K/V biases), or one of the
  // families of config_of (their norms, windows, rotary share and biases).
  const char* arch;
  std::int64_t vocab, hidden, ffn, layers, heads, kv_heads, head_dim, context;
  float rope_base, eps;
  bool tied;
};

// Published shapes of each model (config.json of its checkpoint).
constexpr Shape kShapes[] = {
    {"SmolLM2-135M", "llama", 49152, 576, 1536, 30, 9, 3, 64, 8192, 100000.0f, 1e-5f, true},
    {"Qwen2.5-0.5B", "qwen2", 151936, 896, 4864, 24, 14, 2, 64, 32768, 1000000.0f, 1e-6f, true},
    {"Qwen2.5-1.5B", "qwen2", 151936, 1536, 8960, 28, 12, 2, 128, 32768, 1000000.0f, 1e-6f, true},
    {"Qwen2.5-7B", "qwen2", 152064, 3584, 18944, 28, 28, 4, 128, 32768, 1000000.0f, 1e-6f, false},
    {"Llama-2-7B", "llama", 32000, 4096, 11008, 32, 32, 32, 128, 4096, 10000.0f, 1e-5f, false},
    {"Llama-3-8B", "llama", 128256, 4096, 14336, 32, 32, 8, 128, 8192, 500000.0f, 1e-5f, false},
    {"Mistral-7B", "llama", 32000, 4096, 14336, 32, 32, 8, 128, 32768, 10000.0f, 1e-5f, false},
    {"Gemma-2-9B", "gemma2", 256000, 3584, 14336, 42, 16, 8, 256, 8192, 10000.0f, 1e-6f, true},
    {"Gemma-2-27B", "gemma2", 256000, 4608, 36864, 46, 32, 16, 128, 8192, 10000.0f, 1e-6f, true},
    {"Phi-4-mini", "phi3", 200064, 3072, 8192, 32, 24, 8, 128, 131072, 10000.0f, 1e-5f, true},
    {"Granite-3.1-8B", "granite", 49155, 4096, 12800, 40, 32, 8, 128, 131072, 10000000.0f, 1e-5f, true},
    {"SmolLM3-3B", "smollm3", 128256, 2048, 11008, 36, 16, 4, 128, 65536, 5000000.0f, 1e-6f, true},
    {"GLM-4-9B-0414", "glm4", 151552, 4096, 13696, 40, 32, 2, 128, 32768, 10000.0f, 1e-5f, false},
    {"Ministral-8B", "mistral", 131072, 4096, 12288, 36, 32, 8, 128, 32768, 100000000.0f, 1e-5f, false},
};

// Gemma 2 and GLM-4 norm each sublayer's output too.
bool has_post_norms(const ModelConfig& c) { return c.architecture == "gemma2" || c.architecture == "glm4"; }

ModelConfig config_of(const Shape& s) {
  ModelConfig c;
  c.architecture = s.arch;
  c.name = s.name;
  c.vocab_size = s.vocab;
  c.hidden_size = s.hidden;
  c.intermediate_size = s.ffn;
  c.num_layers = s.layers;
  c.num_heads = s.heads;
  c.num_kv_heads = s.kv_heads;
  c.head_dim = c.value_head_dim = s.head_dim;
  c.context_length = s.context;
  c.rms_norm_eps = s.eps;
  c.rope.base = s.rope_base;
  c.rope.dim = static_cast<int>(s.head_dim);
  c.rope.original_context = s.context;
  const std::string_view arch = s.arch;
  c.rope.style = arch == "qwen2" || arch == "gemma2" || arch == "phi3" ? RopeStyle::kNeox : RopeStyle::kNormal;
  c.attention_bias = arch == "qwen2" || arch == "glm4";
  c.tied_embeddings = s.tied;
  c.sliding_window.assign(static_cast<std::size_t>(s.layers), 0);
  // What the families' configs add to the shape (the weights are random:
  // the multipliers and scalings that only move numbers are left neutral).
  if (arch == "gemma2") {
    for (std::int64_t l = 0; l < s.layers; l += 2) c.sliding_window[static_cast<std::size_t>(l)] = 4096;
    c.attention_softcap = 50.0f;
    c.final_logit_softcap = 30.0f;
    const double scalar = s.layers == 46 ? static_cast<double>(s.hidden / s.heads) : static_cast<double>(s.head_dim);
    c.attention_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  }
  if (arch == "phi3") c.rope.dim = static_cast<int>(s.head_dim * 3 / 4);  // Phi-4-mini rotates 0.75 of each head
  if (arch == "glm4") c.rope.dim = static_cast<int>(s.head_dim / 2);
  if (arch == "smollm3") {
    c.rope_skipped.assign(static_cast<std::size_t>(s.layers), false);
    for (std::int64_t l = 3; l < s.layers; l += 4) c.rope_skipped[static_cast<std::size_t>(l)] = true;
  }
  return c;
}

// One tensor of the model: GGUF name and shape (outermost first).
struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  bool norm = false;  // a norm weight (around 1) rather than a matrix or bias
};

std::vector<TensorSpec> tensors_of(const ModelConfig& c) {
  const std::int64_t H = c.hidden_size, V = c.vocab_size, F = c.intermediate_size, q = c.q_dim(), kv = c.kv_dim();
  std::vector<TensorSpec> t = {{"token_embd.weight", {V, H}}, {"output_norm.weight", {H}, true}};
  if (!c.tied_embeddings) t.push_back({"output.weight", {V, H}});
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
    t.push_back({n("attn_norm.weight"), {H}, true});
    t.push_back({n("attn_q.weight"), {q, H}});
    t.push_back({n("attn_k.weight"), {kv, H}});
    t.push_back({n("attn_v.weight"), {kv, H}});
    if (c.attention_bias) {
      t.push_back({n("attn_q.bias"), {q}});
      t.push_back({n("attn_k.bias"), {kv}});
      t.push_back({n("attn_v.bias"), {kv}});
    }
    t.push_back({n("attn_output.weight"), {H, q}});
    if (has_post_norms(c)) {
      t.push_back({n("post_attention_norm.weight"), {H}, true});
      t.push_back({n("post_ffw_norm.weight"), {H}, true});
    }
    t.push_back({n("ffn_norm.weight"), {H}, true});
    t.push_back({n("ffn_gate.weight"), {F, H}});
    t.push_back({n("ffn_up.weight"), {F, H}});
    t.push_back({n("ffn_down.weight"), {H, F}});
  }
  return t;
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// SplitMix64: a fast, seeded byte stream.
struct Stream {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {  // [lo, hi)
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * 0x1p-24f;
  }
};

void put_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, sizeof(h));
}

// Random weights of `type`: plain numbers uniform in [-0.05, 0.05) (norms
// around 1), or blocks of random codes whose scales keep each number about
// that size, so activations stay finite through every layer.
void fill(DType type, std::int64_t n, bool norm, std::uint8_t* dst, Stream& rng) {
  if (is_float(type)) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = norm ? rng.uniform(0.9f, 1.1f) : rng.uniform(-0.05f, 0.05f);
    if (type == DType::F32) std::memcpy(dst, x.data(), x.size() * sizeof(float));
    for (std::size_t i = 0; type != DType::F32 && i < x.size(); ++i) {
      const std::uint16_t h = type == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return;
  }
  const std::int64_t bytes = row_bytes(type, n);
  std::int64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const std::uint64_t r = rng.next();
    std::memcpy(dst + i, &r, 8);
  }
  for (; i < bytes; ++i) dst[i] = static_cast<std::uint8_t>(rng.next());
  const std::int64_t bb = info(type).block_bytes;
  for (std::uint8_t* b = dst; b < dst + bytes; b += bb) {
    switch (type) {
      case DType::Q4_0:
        put_f16(b, rng.uniform(0.003f, 0.007f));
        break;
      case DType::Q5_0:
        put_f16(b, rng.uniform(0.0015f, 0.0035f));
        break;
      case DType::Q8_0:
        put_f16(b, rng.uniform(0.0002f, 0.0004f));
        break;
      case DType::Q4_1: {
        const float d = rng.uniform(0.003f, 0.007f);
        put_f16(b, d);
        put_f16(b + 2, -7.5f * d);
        break;
      }
      case DType::Q5_1: {
        const float d = rng.uniform(0.0015f, 0.0035f);
        put_f16(b, d);
        put_f16(b + 2, -15.5f * d);
        break;
      }
      case DType::Q2_K:
        put_f16(b + 80, rng.uniform(0.001f, 0.003f));
        put_f16(b + 82, rng.uniform(0.001f, 0.003f));
        break;
      case DType::Q3_K:
        put_f16(b + 108, rng.uniform(0.0003f, 0.0007f));
        break;
      case DType::Q4_K:
      case DType::Q5_K:
        put_f16(b, rng.uniform(0.0001f, 0.0003f));
        put_f16(b + 2, rng.uniform(0.0001f, 0.0003f));
        break;
      case DType::Q6_K:
        put_f16(b + 208, rng.uniform(0.000005f, 0.000015f));
        break;
      // The grid types: values up to 127 (IQ4) or 12 (FP4) times the scale.
      case DType::IQ4_NL:
        put_f16(b, rng.uniform(0.0002f, 0.0004f));
        break;
      case DType::IQ4_XS:
        put_f16(b, rng.uniform(0.000005f, 0.000015f));
        break;
      case DType::MXFP4:
        b[0] = static_cast<std::uint8_t>(119 + rng.next() % 3);  // d from 2^-9 to 2^-7
        break;
      case DType::NVFP4:
        for (int g = 0; g < 4; ++g) b[g] = static_cast<std::uint8_t>(2 + rng.next() % 8);  // d from 2^-9 to 2^-6
        break;
      default:
        fail("--load-format dummy cannot make weights of type {}", name(type));
    }
  }
}

const Shape& find_shape(std::string_view preset) {
  for (const Shape& s : kShapes)
    if (loose_name(s.name) == loose_name(preset)) return s;
  std::string names;
  for (const Shape& s : kShapes) names += fmt::format("{}{}", names.empty() ? "" : ", ", s.name);
  fail("--load-format dummy: \"{}\" is not a preset; -m names one of {}", preset, names);
}

}  // namespace

const std::vector<DummyPreset>& dummy_presets() {
  static const std::vector<DummyPreset> presets = [] {
    std::vector<DummyPreset> out;
    for (const Shape& s : kShapes) {
      DummyPreset p{config_of(s), 0};
      for (const TensorSpec& t : tensors_of(p.config)) p.num_params += numel(t.shape);
      out.push_back(std::move(p));
    }
    return out;
  }();
  return presets;
}

std::vector<std::string> dummy_preset_names() {
  std::vector<std::string> out;
  for (const Shape& s : kShapes) out.emplace_back(s.name);
  return out;
}

LoadedModel load_dummy_model(const DummyModelOptions& o, Backend& backend, const LoadProgress& progress) {
  const Shape& shape = find_shape(o.preset);
  const auto recipe = parse_quant_recipe(o.weights);
  if (!recipe) {
    std::string names;
    for (const std::string& n : quant_recipe_names()) names += (names.empty() ? "" : ", ") + n;
    fail("--dummy-weights \"{}\" is not a quantization recipe ({})", o.weights, names);
  }
  LoadedModel m;
  m.path = fmt::format("dummy:{}", shape.name);
  m.config = config_of(shape);
  const std::vector<TensorSpec> specs = tensors_of(m.config);
  std::vector<TensorToPlan> to_plan;
  for (const TensorSpec& t : specs)
    to_plan.push_back({t.name, DType::F32, static_cast<int>(t.shape.size()), t.shape.back()});
  const std::vector<TensorQuantPlan> plans = plan_quantization(to_plan, *recipe);

  Weights weights(m.path, nullptr);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& s = specs[i];
    const DType type = plans[i].to;
    const std::int64_t n = numel(s.shape);
    Buffer storage = host_buffer(static_cast<std::size_t>(row_bytes(type, s.shape.back()) * (n / s.shape.back())));
    Stream rng{o.seed * 0x100000001B3ull + i};
    fill(type, n, s.norm, static_cast<std::uint8_t*>(storage.data()), rng);
    Tensor t;
    t.data = storage.data();
    t.dtype = type;
    t.ndim = static_cast<int>(s.shape.size());
    for (int d = 0; d < t.ndim; ++d) t.shape[d] = s.shape[static_cast<std::size_t>(d)];
    weights.add_owned(s.name, t, std::move(storage));
  }
  weights.load(backend, progress);
  const ArchEntry* arch = find_arch(m.config.architecture);
  FOLIO_CHECK(arch != nullptr);
  m.weights = std::make_shared<const Weights>(std::move(weights));
  m.model = arch->create(m.config, *m.weights, backend);
  m.config = m.model->config();
  return m;
}

}  // namespace folio
