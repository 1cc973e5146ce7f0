#include "kv/capacity_planner.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/loose_name.h"
#include "tensor/dtype.h"
#include "tensor/kv_dtype.h"

namespace folio {
namespace {

ModelShape dense(std::string name, std::int64_t num_params, int num_layers, int num_heads, int num_kv_heads,
                 int head_dim, std::int64_t max_context_tokens, int num_experts = 0) {
  ModelShape m;
  m.name = std::move(name);
  m.num_params = num_params;
  m.num_layers = num_layers;
  m.num_heads = num_heads;
  m.num_kv_heads = num_kv_heads;
  m.head_dim = head_dim;
  m.num_experts = num_experts;
  m.max_context_tokens = max_context_tokens;
  return m;
}

// Parameter counts are exact, summed from each model's published shapes
// (embeddings, attention, MLP or experts, norms, biases, untied heads).
std::vector<ModelShape> make_model_presets() {
  ModelShape deepseek_v3 = dense("DeepSeek-V3", 671'026'419'200, 61, 128, 1, 576, 163840, 256);
  deepseek_v3.kv_latent_dim = 512 + 64;  // MLA: kv_lora_rank + rope dim, one row for K and V
  return {
      dense("SmolLM2-135M", 134'515'008, 30, 9, 3, 64, 8192),
      dense("Qwen2.5-0.5B", 494'032'768, 24, 14, 2, 64, 32768),
      dense("Qwen2.5-1.5B", 1'543'714'304, 28, 12, 2, 128, 32768),
      dense("Llama-2-7B", 6'738'415'616, 32, 32, 32, 128, 4096),
      dense("Llama-2-13B", 13'015'864'320, 40, 40, 40, 128, 4096),
      dense("Llama-3-8B", 8'030'261'248, 32, 32, 8, 128, 8192),
      dense("Llama-3-70B", 70'553'706'496, 80, 64, 8, 128, 8192),
      dense("Mistral-7B", 7'241'732'096, 32, 32, 8, 128, 32768),
      dense("Qwen2.5-7B", 7'615'616'512, 28, 28, 4, 128, 32768),
      dense("Mixtral-8x7B", 46'702'792'704, 32, 32, 8, 128, 32768, 8),
      deepseek_v3,
      dense("OPT-13B", 12'853'473'280, 40, 40, 40, 128, 2048),
      // The families of 2025-26 (issue 39), from their config.json files.
      dense("Gemma-2-9B", 9'241'705'984, 42, 16, 8, 256, 8192),
      dense("Gemma-2-27B", 27'227'128'320, 46, 32, 16, 128, 8192),
      dense("Phi-4-mini", 3'836'021'760, 32, 24, 8, 128, 131072),
      dense("Granite-3.1-8B", 8'170'848'256, 40, 32, 8, 128, 131072),
      dense("SmolLM3-3B", 3'075'098'624, 36, 16, 4, 128, 65536),
      dense("GLM-4-9B-0414", 9'400'279'040, 40, 32, 2, 128, 32768),
      dense("Ministral-8B", 8'019'808'256, 36, 32, 8, 128, 32768),
      // gpt-oss (issue 40): every KV row counted at the full context, also on
      // the sliding-window layers, since folio keeps their blocks (the
      // window's saving is not taken yet).
      dense("gpt-oss-20b", 20'914'757'184, 24, 64, 8, 64, 131072, 32),
      dense("gpt-oss-120b", 116'829'156'672, 36, 64, 8, 64, 131072, 128),
  };
}

// Marketed figures, decimal units (1 GB = 1e9 bytes, 1 TB/s = 1e12 B/s).
std::vector<DeviceSpec> make_device_presets() {
  return {
      {"H200", 141'000'000'000, 4.8e12},
      {"H100", 80'000'000'000, 3.35e12},
      {"A100", 80'000'000'000, 2.0e12},
      {"RTX-4090", 24'000'000'000, 1.0e12},
  };
}

// A number and a unit: "12.5 GiB/s" -> 12.5 x 2^30 (per_second allows the /s).
std::optional<double> parse_with_unit(std::string_view text, bool per_second) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t.push_back(c);
  if (per_second && t.size() > 2 && t.ends_with("/s")) t.resize(t.size() - 2);
  double value = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || end == t.data() || !(value >= 0) || !std::isfinite(value)) return std::nullopt;
  const std::size_t i = static_cast<std::size_t>(end - t.data());
  const std::string unit = loose_name(t.substr(i));
  static const std::pair<const char*, double> kUnits[] = {
      {"b", 1.0},       {"kb", 1e3},         {"mb", 1e6},         {"gb", 1e9},         {"tb", 1e12},
      {"kib", 1024.0},  {"mib", 1048576.0},  {"gib", 1073741824.0}, {"tib", 1099511627776.0},
  };
  for (const auto& [name, scale] : kUnits)
    if (unit == name) return value * scale;
  return std::nullopt;
}

}  // namespace

std::optional<NumberFormat> kv_number_format(std::string_view name) {
  const auto type = parse_kv_dtype(name);
  if (!type) return std::nullopt;
  const KvDTypeInfo& i = info(*type);
  NumberFormat f{std::string(i.name), 1, i.code_bits / 8, 0};
  if (i.scale_group > 0) {
    f.block_elems = i.scale_group;
    f.block_bytes = i.scale_group * i.code_bits / 8 + 2;
  } else if (i.scale_group < 0) {
    f.row_scale_bytes = 2;
  }
  return f;
}

std::vector<std::string> kv_number_format_names() { return kv_dtype_names(); }

std::optional<KvFormats> kv_number_formats(std::string_view names) {
  const std::size_t colon = names.find(':');
  const auto k = kv_number_format(names.substr(0, colon));
  const auto v = colon == std::string_view::npos ? k : kv_number_format(names.substr(colon + 1));
  if (!k || !v) return std::nullopt;
  return KvFormats{*k, *v, k->name == v->name ? k->name : k->name + ":" + v->name};
}

std::optional<NumberFormat> weight_number_format(std::string_view name) {
  const std::string loose = loose_name(name);
  // Hugging Face checkpoints' formats (model/hf_quantization.h), as stored:
  // fp8 with one scale per tensor (or per row: a few bytes more), fp8 with an
  // f32 scale per 128x128 block, bitsandbytes nf4 with an f32 absmax per 64
  // numbers, and nf4 with double quantization (an 8-bit absmax per 64, an f32
  // per 256 of those: 256 blocks of 64 numbers in 8192 + 256 + 4 bytes).
  if (loose == "fp8") return NumberFormat{"fp8", 1, 1};
  if (loose == "fp8block128" || loose == "fp8b128") return NumberFormat{"fp8_block128", 128 * 128, 128 * 128 + 4};
  if (loose == "nf4") return NumberFormat{"nf4", 64, 32 + 4};
  if (loose == "nf4dq") return NumberFormat{"nf4_dq", 256 * 64, 256 * 32 + 256 + 4};
  const auto t = parse_dtype(name);
  if (!t) return std::nullopt;
  const DTypeInfo& i = info(*t);
  return NumberFormat{std::string(i.name), i.block_elems, i.block_bytes};
}

std::vector<std::string> weight_number_format_names() {
  return {"f32",  "f16",    "bf16",   "fp8",    "fp8_block128", "q8_0",  "q6_k", "q5_k",
          "q4_k", "q4_0", "iq4_nl", "iq4_xs", "mxfp4",        "nvfp4", "nf4",  "nf4_dq"};
}

ModelShape model_shape(const ModelConfig& c) {
  ModelShape m;
  m.name = c.name.empty() ? c.architecture : c.name;
  m.num_layers = static_cast<int>(c.num_layers);
  m.num_heads = static_cast<int>(c.num_heads);
  m.num_kv_heads = static_cast<int>(c.num_kv_heads);
  m.head_dim = static_cast<int>(c.head_dim);
  m.value_head_dim = static_cast<int>(c.value_head_dim);
  m.num_experts = static_cast<int>(c.num_experts);
  m.max_context_tokens = c.context_length;
  bool uniform = true;
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    uniform = uniform && c.writes_kv(l) && c.num_kv_heads_of(l) == c.num_kv_heads && c.head_dim_of(l) == c.head_dim &&
              c.value_head_dim_of(l) == c.value_head_dim;
  if (!uniform)
    for (std::int64_t l = 0; l < c.num_layers; ++l)
      if (c.writes_kv(l))
        m.kv_layers.push_back({static_cast<int>(c.num_kv_heads_of(l)), static_cast<int>(c.head_dim_of(l)),
                               static_cast<int>(c.value_head_dim_of(l))});
  return m;
}

const std::vector<ModelShape>& model_presets() {
  static const std::vector<ModelShape> presets = make_model_presets();
  return presets;
}

const std::vector<DeviceSpec>& device_presets() {
  static const std::vector<DeviceSpec> presets = make_device_presets();
  return presets;
}

std::optional<ModelShape> find_model_preset(std::string_view name) {
  for (const auto& m : model_presets())
    if (loose_name(m.name) == loose_name(name)) return m;
  return std::nullopt;
}

std::optional<DeviceSpec> find_device_preset(std::string_view name) {
  for (const auto& d : device_presets())
    if (loose_name(d.name) == loose_name(name) || loose_name(d.name) == "rtx" + loose_name(name)) return d;
  return std::nullopt;
}

std::int64_t kv_bytes_per_token(const ModelShape& model, const NumberFormat& kv_format) {
  return kv_bytes_per_token(model, kv_format, kv_format);
}

std::int64_t kv_bytes_per_token(const ModelShape& model, const NumberFormat& k_format, const NumberFormat& v_format) {
  if (model.num_layers <= 0) fail("model {}: number of layers must be positive", model.name);
  if (model.kv_latent_dim > 0) return model.num_layers * k_format.row_bytes(model.kv_latent_dim);
  if (!model.kv_layers.empty()) {
    std::int64_t bytes = 0;
    for (const ModelShape::LayerKv& l : model.kv_layers)
      bytes += static_cast<std::int64_t>(l.num_kv_heads) *
               (k_format.row_bytes(l.head_dim) + v_format.row_bytes(l.value_head_dim));
    return bytes;
  }
  if (model.num_kv_heads <= 0 || model.head_dim <= 0)
    fail("model {}: KV heads ({}) and head dim ({}) must be positive", model.name, model.num_kv_heads,
         model.head_dim);
  const int value_head_dim = model.value_head_dim > 0 ? model.value_head_dim : model.head_dim;
  return static_cast<std::int64_t>(model.num_layers) * model.num_kv_heads *
         (k_format.row_bytes(model.head_dim) + v_format.row_bytes(value_head_dim));
}

std::int64_t weight_bytes(const ModelShape& model, const NumberFormat& weight_format) {
  return weight_format.row_bytes(model.num_params);
}

CapacityPlan plan_capacity(const CapacityQuery& q) {
  if (q.context_tokens <= 0) fail("context length must be positive, got {}; pass --ctx 4096 or similar", q.context_tokens);
  if (q.num_users <= 0) fail("number of users must be positive, got {}; pass --users 1 or more", q.num_users);
  if (q.device.memory_bytes <= 0) fail("device memory must be positive; pass --device H100 or --mem 80GB");
  if (q.block_size <= 0) fail("block size must be positive, got {}", q.block_size);
  if (q.weight_bytes < 0) fail("weight bytes must not be negative");
  if (!q.reserve_bytes && (q.reserve_fraction < 0 || q.reserve_fraction >= 1))
    fail("reserve must be a share in [0, 1), got {}; pass --reserve 10% or --reserve 4GB", q.reserve_fraction);

  CapacityPlan p;
  p.weight_bytes = q.weight_bytes;
  p.kv_bytes_per_token = kv_bytes_per_token(q.model, q.kv_format, q.v_format.value_or(q.kv_format));
  p.tokens_per_user = (q.context_tokens + q.block_size - 1) / q.block_size * q.block_size;
  // Products of user-given counts: refused rather than wrapped.
  const auto times = [](std::int64_t a, std::int64_t b, const char* what) {
    std::int64_t out = 0;
    if (__builtin_mul_overflow(a, b, &out) || out > kMaxPlannedBytes)
      fail("{} would pass {} bytes; ask for fewer users or a shorter context", what, kMaxPlannedBytes);
    return out;
  };
  p.kv_bytes_per_user = times(p.tokens_per_user, p.kv_bytes_per_token, "the KV cache of one user");
  p.kv_bytes_total = times(q.num_users, p.kv_bytes_per_user, "the KV cache of all users");
  p.reserve_bytes = q.reserve_bytes ? *q.reserve_bytes
                                    : static_cast<std::int64_t>(std::llround(q.reserve_fraction *
                                                                             static_cast<double>(q.device.memory_bytes)));
  p.kv_budget_bytes = q.device.memory_bytes - p.reserve_bytes - p.weight_bytes;
  p.needed_bytes = p.weight_bytes + p.kv_bytes_total + p.reserve_bytes;
  p.fits = p.needed_bytes <= q.device.memory_bytes;
  if (p.kv_budget_bytes > 0) {
    p.max_users = p.kv_budget_bytes / p.kv_bytes_per_user;
    const std::int64_t tokens = p.kv_budget_bytes / (q.num_users * p.kv_bytes_per_token);
    p.max_context_tokens = tokens / q.block_size * q.block_size;
  }
  p.bytes_per_step = p.weight_bytes + p.kv_bytes_total;
  if (q.device.bandwidth_bytes_per_s > 0 && p.bytes_per_step > 0) {
    p.decode_tokens_per_s_per_user = q.device.bandwidth_bytes_per_s / static_cast<double>(p.bytes_per_step);
    p.decode_tokens_per_s_total = p.decode_tokens_per_s_per_user * static_cast<double>(q.num_users);
  }
  return p;
}

std::optional<std::int64_t> parse_byte_size(std::string_view text) {
  auto v = parse_with_unit(text, false);
  if (!v || *v > 9.0e18) return std::nullopt;
  return static_cast<std::int64_t>(std::llround(*v));
}

std::optional<double> parse_bandwidth(std::string_view text) { return parse_with_unit(text, true); }

}  // namespace folio
