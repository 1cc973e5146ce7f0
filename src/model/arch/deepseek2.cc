// DeepSeek-V2 and V3 (llama.cpp's `deepseek2`; Hugging Face's DeepseekV2 and
// DeepseekV3 classes): multi-head latent attention and DeepSeek's experts.
// Both formats are read into one layout: the attention run as one shared K/V
// head over the cache's latent and rotary key, with the key up-projection
// folded into Q's weight and the value up-projection into the output's at
// load (DeepseekModel says why and how), and the router's rules in
// GroupedRouting.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/arch/deepseek_model.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"
#include "model/safetensors_file.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

// The latent attention's sizes, checked against each other. The model is
// run as one K/V head of kv_lora_rank + rope.dim with values of kv_lora_rank.
void finish_mla(ModelConfig& c, const std::string& source, double softmax_mscale) {
  if (c.kv_lora_rank <= 0 || c.qk_nope_head_dim <= 0 || c.mla_value_head_dim <= 0 || c.rope.dim <= 0 ||
      c.rope.dim % 2 != 0)
    fail("{}: latent attention needs a positive kv_lora_rank ({}), qk_nope_head_dim ({}), v_head_dim ({}) and an even "
         "qk_rope_head_dim ({})",
         source, c.kv_lora_rank, c.qk_nope_head_dim, c.mla_value_head_dim, c.rope.dim);
  if (c.q_lora_rank < 0) fail("{}: q_lora_rank {} is negative", source, c.q_lora_rank);
  c.num_kv_heads = 1;
  c.head_dim = c.kv_lora_rank + c.rope.dim;
  c.value_head_dim = c.kv_lora_rank;
  c.rope.style = RopeStyle::kNormal;  // adjacent pairs in file order, in both formats
  // The softmax scale of the expanded heads (nope + rope), never of the
  // latent's 576, times YaRN's mscale(all_dim) squared.
  c.attention_scale = static_cast<float>(softmax_mscale * softmax_mscale /
                                         std::sqrt(static_cast<double>(c.qk_nope_head_dim + c.rope.dim)));
}

void finish_routing(ModelConfig& c, const std::string& source) {
  c.grouped_routing = true;
  if (c.num_dense_layers < 0 || c.num_dense_layers > c.num_layers)
    fail("{}: {} leading dense layers of {}", source, c.num_dense_layers, c.num_layers);
  if (c.num_dense_layers < c.num_layers) c.check_experts(source);
  const GroupedRouting& r = c.routing;
  if (r.num_groups < 1 || c.num_experts % r.num_groups != 0 || r.groups_used < 1 || r.groups_used > r.num_groups)
    fail("{}: {} experts in {} groups with {} used: the groups must split the experts evenly and at least one be used",
         source, c.num_experts, r.num_groups, r.groups_used);
  if (c.num_experts_used > r.groups_used * (c.num_experts / r.num_groups))
    fail("{}: {} experts per token, but the {} groups kept hold only {}", source, c.num_experts_used, r.groups_used,
         r.groups_used * (c.num_experts / r.num_groups));
  if (r.group_top2 && c.num_experts / r.num_groups < 2 && r.num_groups > 1)
    fail("{}: groups scored by their top two need two experts each", source);
  if (!(r.scale > 0)) fail("{}: routed_scaling_factor {} must be positive", source, r.scale);
}

// llama.cpp's GGUF: head_count_kv 1, key_length kv_lora + rope, value_length
// kv_lora, key_length_mla / value_length_mla the expanded heads' sizes.
// expert_gating_func 2 is V3's sigmoid router (groups scored by their top
// two); absent or 1, V2's softmax (groups scored by their best: llama.cpp
// scores every group by its top two, which is V3's rule, not V2's).
void configure_gguf(ModelConfig& c, const GgufFile& f) {
  const std::string a = "deepseek2.";
  c.kv_lora_rank = f.get_int(a + "attention.kv_lora_rank", 0);
  c.q_lora_rank = f.get_int(a + "attention.q_lora_rank", 0);
  const std::int64_t qk = f.get_int(a + "attention.key_length_mla", 0);
  c.mla_value_head_dim = f.get_int(a + "attention.value_length_mla", 0);
  if (qk <= 0 || c.mla_value_head_dim <= 0)
    fail("{}: a deepseek2 file needs attention.key_length_mla and attention.value_length_mla (files from llama.cpp's "
         "converter before latent attention's split are not read; convert the checkpoint again)",
         f.path());
  c.qk_nope_head_dim = qk - c.rope.dim;
  if (c.head_dim != c.kv_lora_rank + c.rope.dim || c.value_head_dim != c.kv_lora_rank || c.num_kv_heads != 1)
    fail("{}: key_length {} / value_length {} / head_count_kv {} are not latent attention's {} / {} / 1", f.path(),
         c.head_dim, c.value_head_dim, c.num_kv_heads, c.kv_lora_rank + c.rope.dim, c.kv_lora_rank);
  double mscale = 1.0;
  const double log_mul = f.get_float(a + "rope.scaling.yarn_log_multiplier", 0.0);
  if (c.rope.scaling == RopeScaling::kYarn && c.rope.factor > 1.0f) mscale = 1.0 + log_mul * std::log(c.rope.factor);
  finish_mla(c, f.path(), mscale);

  c.num_dense_layers = f.get_int(a + "leading_dense_block_count", 0);
  if (!c.is_moe()) fail("{}: a deepseek2 file needs expert_count", f.path());
  c.expert_weights_norm = f.get_bool(a + "expert_weights_norm", false);
  c.shared_expert_intermediate_size = f.get_int(a + "expert_shared_count", 0) * c.expert_intermediate_size;
  const std::int64_t gating = f.get_int(a + "expert_gating_func", 1);
  if (gating != 1 && gating != 2) fail("{}: expert_gating_func {} is neither 1 (softmax) nor 2 (sigmoid)", f.path(), gating);
  c.routing.sigmoid = gating == 2;
  c.routing.group_top2 = gating == 2;
  c.routing.num_groups = f.get_int(a + "expert_group_count", 1);
  c.routing.groups_used = f.get_int(a + "expert_group_used_count", c.routing.num_groups);
  c.routing.normalize = c.expert_weights_norm;
  c.routing.scale = static_cast<float>(f.get_float(a + "expert_weights_scale", 1.0));
  finish_routing(c, f.path());
}

// An integer key that may be null (q_lora_rank: null, n_group: null).
std::int64_t optional_int(const HfConfig& hf, std::string_view key, std::int64_t fallback) {
  const nlohmann::json* v = hf.find(key);
  return v == nullptr || v->is_null() ? fallback : hf.get_int(key, fallback);
}

void configure_hf(ModelConfig& c, const HfConfig& hf, bool v3) {
  require_hf_silu(c, hf, v3 ? "DeepseekV3" : "DeepseekV2");
  c.q_lora_rank = optional_int(hf, "q_lora_rank", 0);
  c.kv_lora_rank = hf.need_count("kv_lora_rank");
  c.qk_nope_head_dim = hf.need_count("qk_nope_head_dim");
  c.mla_value_head_dim = hf.need_count("v_head_dim");
  c.rope.dim = static_cast<int>(hf.need_count("qk_rope_head_dim"));
  // transformers multiplies the softmax scale by mscale(factor,
  // mscale_all_dim)^2 whenever the rope type is not the default one.
  double mscale = 1.0;
  if (c.rope.scaling != RopeScaling::kNone && c.rope.mscale_all_dim > 0 && c.rope.factor > 1.0f)
    mscale = 0.1 * c.rope.mscale_all_dim * std::log(c.rope.factor) + 1.0;
  finish_mla(c, hf.source(), mscale);

  c.num_experts = hf.need_count("n_routed_experts");
  c.num_experts_used = hf.need_count("num_experts_per_tok");
  c.expert_intermediate_size = hf.need_count("moe_intermediate_size");
  c.shared_expert_intermediate_size = optional_int(hf, "n_shared_experts", 0) * c.expert_intermediate_size;
  c.num_dense_layers = optional_int(hf, "first_k_dense_replace", 0);
  // transformers' routers: V3's always sigmoid with groups by their top two
  // (whatever scoring_func and topk_method say); V2's softmax, grouped only
  // under group_limited_greedy, never renormalised.
  c.routing.sigmoid = v3;
  c.routing.group_top2 = v3;
  const bool grouped = v3 || hf.get_string("topk_method", "greedy") == "group_limited_greedy";
  c.routing.num_groups = grouped ? optional_int(hf, "n_group", 1) : 1;
  c.routing.groups_used = grouped ? optional_int(hf, "topk_group", 1) : 1;
  c.expert_weights_norm = v3 && hf.get_bool("norm_topk_prob", true);
  c.routing.normalize = c.expert_weights_norm;
  c.routing.scale = static_cast<float>(hf.get_float("routed_scaling_factor", v3 ? 2.5 : 1.0));
  finish_routing(c, hf.source());
}

// Checkpoint names of the latent attention and DeepSeek's experts -> GGUF's
// (after "model.layers.N." and "blk.N.").
constexpr std::string_view kNames[][2] = {
    {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
    {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
    {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
    {"self_attn.kv_b_proj.weight", "attn_kv_b.weight"},
    {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
};

bool add_hf_tensor(Weights& w, const HfCheckpoint& c, const SafetensorsTensor& t) {
  unsigned layer = 0;
  std::string_view rest;
  if (!split_hf_layer_name(t.name, layer, rest)) return false;
  for (const auto& [hf, gguf] : kNames) {
    if (rest != hf) continue;
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16)
      fail("{}: tensor {} has dtype {}; DeepSeek's attention and router tensors are read as floats", c.dir(), t.name,
           folio::name(t.stored));
    Tensor view;
    view.data = const_cast<std::uint8_t*>(t.data);  // read-only mapping: ops never write weights
    view.dtype = t.dtype;
    view.ndim = t.num_dims;
    for (int d = 0; d < t.num_dims; ++d) view.shape[d] = t.shape[d];
    const std::string name = fmt::format("blk.{}.{}", layer, gguf);
    if (view.ndim != 1 || view.dtype == DType::F32) {
      w.add(name, view);
      return true;
    }
    // Norms and the bias are read as f32 by the ops.
    Buffer storage = host_buffer(static_cast<std::size_t>(view.numel()) * sizeof(float));
    dequantize_row(view.dtype, view.data, static_cast<float*>(storage.data()), view.numel());
    const Tensor values = storage.view(DType::F32, {view.numel()});  // before the move below
    w.add_owned(name, values, std::move(storage));
    return true;
  }
  return false;
}

// A host tensor's numbers as f32, row by row (any weight type).
std::vector<float> host_floats(const Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  const std::int64_t cols = t.cols();
  for (std::int64_t r = 0; r < t.rows(); ++r)
    dequantize_row(t.dtype, static_cast<const std::uint8_t*>(t.data) + static_cast<std::size_t>(r) * t.row_bytes(),
                   out.data() + r * cols, cols);
  return out;
}

const Tensor& need_shape(const Weights& w, const std::string& name, std::initializer_list<std::int64_t> shape) {
  return w.get(name, shape);
}

// The folds of one layer (DeepseekModel's header has the algebra), in f64
// sums, stored f32: Q's weight of [rope R | latent K] rows per head, and the
// output's weight over the latent values of all heads; and the compressed
// KV projection split into its latent and rotary-key rows.
void fold_layer(Weights& w, const ModelConfig& c, std::int64_t l) {
  auto n = [l](const char* suffix) { return fmt::format("blk.{}.{}", l, suffix); };
  const std::int64_t N = c.num_heads, P = c.qk_nope_head_dim, R = c.rope.dim, K = c.kv_lora_rank,
                     V = c.mla_value_head_dim, H = c.hidden_size;
  const std::int64_t q_in = c.q_lora_rank > 0 ? c.q_lora_rank : H;
  const Tensor& wq = need_shape(w, n(c.q_lora_rank > 0 ? "attn_q_b.weight" : "attn_q.weight"), {N * (P + R), q_in});
  const Tensor& wo = need_shape(w, n("attn_output.weight"), {H, N * V});
  // W_UK of head i, [P, K], and W_UV, [V, K]: from kv_b ([N * (P + V), K],
  // per head P key rows then V value rows), or from llama.cpp's split k_b
  // ([N, K, P]: W_UK transposed) and v_b ([N, V, K]).
  std::vector<float> uk(static_cast<std::size_t>(N * P * K)), uv(static_cast<std::size_t>(N * V * K));
  if (w.find(n("attn_kv_b.weight")) != nullptr) {
    const std::vector<float> kv_b = host_floats(need_shape(w, n("attn_kv_b.weight"), {N * (P + V), K}));
    for (std::int64_t i = 0; i < N; ++i) {
      std::memcpy(&uk[i * P * K], &kv_b[i * (P + V) * K], static_cast<std::size_t>(P * K) * sizeof(float));
      std::memcpy(&uv[i * V * K], &kv_b[(i * (P + V) + P) * K], static_cast<std::size_t>(V * K) * sizeof(float));
    }
  } else {
    const std::vector<float> k_b = host_floats(need_shape(w, n("attn_k_b.weight"), {N, K, P}));
    uv = host_floats(need_shape(w, n("attn_v_b.weight"), {N, V, K}));
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t p = 0; p < P; ++p)
        for (std::int64_t k = 0; k < K; ++k) uk[(i * P + p) * K + k] = k_b[(i * K + k) * P + p];
  }
  const std::vector<float> q = host_floats(wq);
  Buffer q_storage = host_buffer(static_cast<std::size_t>(N * (R + K) * q_in) * sizeof(float));
  auto* qf = static_cast<float*>(q_storage.data());
  std::vector<double> acc(static_cast<std::size_t>(q_in));
  for (std::int64_t i = 0; i < N; ++i) {
    const float* q_nope = &q[i * (P + R) * q_in];
    float* rows = qf + i * (R + K) * q_in;
    std::memcpy(rows, q_nope + P * q_in, static_cast<std::size_t>(R * q_in) * sizeof(float));
    for (std::int64_t k = 0; k < K; ++k) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t p = 0; p < P; ++p) {
        const double u = uk[(i * P + p) * K + k];
        for (std::int64_t j = 0; j < q_in; ++j) acc[j] += u * q_nope[p * q_in + j];
      }
      for (std::int64_t j = 0; j < q_in; ++j) rows[(R + k) * q_in + j] = static_cast<float>(acc[j]);
    }
  }
  const Tensor q_view = q_storage.view(DType::F32, {N * (R + K), q_in});
  w.add_owned(n("attn_q_latent.weight"), q_view, std::move(q_storage));

  const std::vector<float> o = host_floats(wo);
  Buffer o_storage = host_buffer(static_cast<std::size_t>(H * N * K) * sizeof(float));
  auto* of = static_cast<float*>(o_storage.data());
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t i = 0; i < N; ++i)
      for (std::int64_t k = 0; k < K; ++k) {
        double sum = 0;
        for (std::int64_t v = 0; v < V; ++v) sum += static_cast<double>(o[h * N * V + i * V + v]) * uv[(i * V + v) * K + k];
        of[h * N * K + i * K + k] = static_cast<float>(sum);
      }
  const Tensor o_view = o_storage.view(DType::F32, {H, N * K});
  w.add_owned(n("attn_output_latent.weight"), o_view, std::move(o_storage));

  const Weights::RowPart kv_a[] = {{n("attn_kv_a_latent.weight"), K}, {n("attn_k_rope.weight"), R}};
  w.split_rows(n("attn_kv_a_mqa.weight"), kv_a);
}

void fold_weights(Weights& w, const ModelConfig& c) {
  for (std::int64_t l = 0; l < c.num_layers; ++l) fold_layer(w, c, l);
}

std::unique_ptr<Model> create(const ModelConfig& c, const Weights& w, Backend& be) {
  return std::make_unique<DeepseekModel>(c, w, be);
}

}  // namespace

const ArchEntry kDeepseek2Arch{
    .name = "deepseek2",
    .configure = configure_gguf,
    .create = create,
    .hf_class = "DeepseekV2ForCausalLM",
    .configure_hf = [](ModelConfig& c, const HfConfig& hf) { configure_hf(c, hf, /*v3=*/false); },
    .split_weights = fold_weights,
    .family = "DeepSeek-V2 / V3",
    .hf_tensor = add_hf_tensor,
};

// The same architecture under V3's class name: its router (sigmoid, the
// correction bias, groups by their top two) is the one difference.
const ArchEntry kDeepseek3Arch{
    .name = "deepseek2",
    .configure = configure_gguf,
    .create = create,
    .hf_class = "DeepseekV3ForCausalLM",
    .configure_hf = [](ModelConfig& c, const HfConfig& hf) { configure_hf(c, hf, /*v3=*/true); },
    .split_weights = fold_weights,
    .family = "DeepSeek-V2 / V3",
    .hf_tensor = add_hf_tensor,
};

}  // namespace folio
