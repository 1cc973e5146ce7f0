// CapacityPlanner: whether a model and its KV cache fit a device, how many
// users or how long a context fit, and the memory-bandwidth bound on decode.
// Pure arithmetic on exact byte counts; every figure is derivable by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_types.h"
#include "model/model_config.h"

namespace folio {

// How numbers are stored: block_bytes bytes per block of block_elems numbers
// (f16: 2 per 1; q8_0: 34 per 32; q4_k: 144 per 256), plus row_scale_bytes
// per row (the KV cache's fp8_e4m3 keeps an f16 scale per token and KV head).
struct NumberFormat {
  std::string name;
  std::int64_t block_elems = 1;
  std::int64_t block_bytes = 2;
  std::int64_t row_scale_bytes = 0;

  // Bits per number, per-row scales left out.
  double bits_per_number() const { return 8.0 * static_cast<double>(block_bytes) / static_cast<double>(block_elems); }
  // Bytes of a row of n numbers, in whole blocks, with its row scale.
  std::int64_t row_bytes(std::int64_t n) const {
    return (n + block_elems - 1) / block_elems * block_bytes + row_scale_bytes;
  }
};

// The KV cache formats, byte for byte as the engine stores them
// (tensor/kv_dtype.h): f32, f16, bf16, q8_0, fp8_e4m3 (or fp8). nullopt for
// other names.
std::optional<NumberFormat> kv_number_format(std::string_view name);
std::vector<std::string> kv_number_format_names();

// K's and V's formats from "q8_0" (both) or "K:V" ("q8_0:f16"), as
// --kv-cache-dtype reads them; `name` is "q8_0" or "q8_0:f16". nullopt when
// either name is unknown.
struct KvFormats {
  NumberFormat k;
  NumberFormat v;
  std::string name;
};
std::optional<KvFormats> kv_number_formats(std::string_view names);

// Weight formats: the GGUF types (f16, bf16, q8_0, q6_k, q4_k, ...) plus the
// Hugging Face checkpoints' fp8 (a byte a number), fp8_block128 (and a scale
// per 128x128 block), nf4 and nf4_dq (bitsandbytes, double quantization).
// nullopt for other names.
std::optional<NumberFormat> weight_number_format(std::string_view name);
// The common ones, widest first, for menus.
std::vector<std::string> weight_number_format_names();

// The numbers that size a model's weights and KV cache.
struct ModelShape {
  std::string name;
  std::int64_t num_params = 0;  // every weight, all experts included
  int num_layers = 0;
  int num_heads = 0;  // query heads: num_kv_heads may be any divisor (MHA = num_heads, MQA = 1); 0: unknown
  int num_kv_heads = 0;
  int head_dim = 0;        // of K
  int value_head_dim = 0;  // of V; 0: same as head_dim
  // Multi-head latent attention (DeepSeek-V2/V3): numbers cached per token
  // per layer, one latent row shared by K and V (kv_lora_rank + rope dim).
  // 0: separate K and V of num_kv_heads x head_dim each.
  int kv_latent_dim = 0;
  int num_experts = 0;          // routed experts per MoE layer; 0 for a dense model
  std::int64_t max_context_tokens = 0;  // trained context, for reference
  // Layers whose caches differ in shape, or that read another layer's (Gemma
  // 4): one entry per layer that writes a cache; empty: num_layers layers of
  // num_kv_heads x head_dim (value_head_dim) each.
  struct LayerKv {
    int num_kv_heads = 0;
    int head_dim = 0;
    int value_head_dim = 0;
  };
  std::vector<LayerKv> kv_layers;
};

struct DeviceSpec {
  std::string name;
  std::int64_t memory_bytes = 0;
  double bandwidth_bytes_per_s = 0;
};

// Presets, matched ignoring case, spaces, '-' and '_' ("llama-2-7b" ==
// "Llama 2 7B").
const std::vector<ModelShape>& model_presets();
// A model's shape from its config: name, layers, heads, head sizes, experts,
// trained context. num_params (the file's tensors) and an MLA latent row are
// the caller's to fill.
ModelShape model_shape(const ModelConfig& config);
const std::vector<DeviceSpec>& device_presets();
std::optional<ModelShape> find_model_preset(std::string_view name);
std::optional<DeviceSpec> find_device_preset(std::string_view name);

// KV bytes per token: layers x (kv_heads rows of head_dim for K and for V,
// or one latent row) x bytes per number (in whole blocks of a quantized
// format, scales included). K and V may differ in format; a latent row is
// stored in K's.
std::int64_t kv_bytes_per_token(const ModelShape& model, const NumberFormat& kv_format);
std::int64_t kv_bytes_per_token(const ModelShape& model, const NumberFormat& k_format, const NumberFormat& v_format);
// Every weight stored in one format (a quantized file keeps a few tensors,
// such as norms, wider; its real size is in the file).
std::int64_t weight_bytes(const ModelShape& model, const NumberFormat& weight_format);

struct CapacityQuery {
  ModelShape model;
  std::int64_t weight_bytes = 0;  // from weight_bytes() or a model file's tensors
  NumberFormat kv_format;                 // K's, and V's unless v_format is set
  std::optional<NumberFormat> v_format;
  DeviceSpec device;
  std::int64_t context_tokens = 4096;  // per user
  std::int64_t num_users = 1;
  int block_size = kDefaultBlockSize;
  // Kept back for activations, the runtime and fragmentation: a share of the
  // device's memory, unless reserve_bytes is set.
  double reserve_fraction = 0.10;
  std::optional<std::int64_t> reserve_bytes;
};

struct CapacityPlan {
  std::int64_t weight_bytes = 0;
  std::int64_t kv_bytes_per_token = 0;
  std::int64_t tokens_per_user = 0;     // the context rounded up to whole blocks
  std::int64_t kv_bytes_per_user = 0;   // tokens_per_user x kv_bytes_per_token
  std::int64_t kv_bytes_total = 0;      // num_users x kv_bytes_per_user
  std::int64_t reserve_bytes = 0;
  std::int64_t kv_budget_bytes = 0;     // memory - reserve - weights; < 0 when weights alone overflow
  std::int64_t needed_bytes = 0;        // weights + KV + reserve
  bool fits = false;                    // needed_bytes <= memory
  std::int64_t max_users = 0;           // at context_tokens
  std::int64_t max_context_tokens = 0;  // at num_users, whole blocks
  // Decode is memory-bound: a step reads every weight once plus every
  // user's KV, here at the full context (the worst case of a generation).
  std::int64_t bytes_per_step = 0;
  double decode_tokens_per_s_per_user = 0;
  double decode_tokens_per_s_total = 0;
};

// Throws Error, saying which input to change, for non-positive sizes and for
// a KV cache past kMaxPlannedBytes (so that no sum of the plan overflows).
inline constexpr std::int64_t kMaxPlannedBytes = std::int64_t{1} << 60;
CapacityPlan plan_capacity(const CapacityQuery& query);

// "80GB", "141 GB", "24GiB", "512KiB", "1.5e9B" -> bytes; a unit is
// required. nullopt when unreadable.
std::optional<std::int64_t> parse_byte_size(std::string_view text);
// "3.35TB/s", "900GB/s", "2TB" -> bytes per second; a unit is required.
std::optional<double> parse_bandwidth(std::string_view text);

}  // namespace folio
