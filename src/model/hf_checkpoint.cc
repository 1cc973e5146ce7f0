#include "model/hf_checkpoint.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>

#include "backend/buffer.h"
#include "core/error.h"
#include "model/arch/registry.h"
#include "model/weights.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSingleFile = "model.safetensors";
constexpr std::string_view kIndexFile = "model.safetensors.index.json";

// A shard named by the index must be a plain file name in the directory.
void check_shard_name(const std::string& name, const fs::path& index) {
  if (name.empty() || name.find('/') != std::string::npos || name.find('\\') != std::string::npos || name == "." ||
      name == "..")
    fail("{}: shard \"{}\" is not a file name in the model's directory", index.string(), name);
}

// Per-layer HF names (after "model.layers.N.") -> GGUF names (after "blk.N.").
struct LayerName {
  std::string_view hf;
  std::string_view gguf;
};
constexpr LayerName kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    // Fused projections, split at load by their architectures (Phi-3, GLM-4, Granite 4).
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},
    {"shared_mlp.input_linear.weight", "ffn_up.weight"},  // Granite 4's [gate; up]
    {"shared_mlp.output_linear.weight", "ffn_down.weight"},
    // GLM-4's norms after attention and after the FFN.
    {"post_self_attn_layernorm.weight", "post_attention_norm.weight"},
    {"post_mlp_layernorm.weight", "post_ffw_norm.weight"},
    // Mixture of experts: the router and Qwen2-MoE's shared expert and its gate.
    {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    // gpt-oss: the output projection's bias, the attention sinks, the router and its bias.
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.sinks", "attn_sinks.weight"},
    {"mlp.router.weight", "ffn_gate_inp.weight"},
    {"mlp.router.bias", "ffn_gate_inp.bias"},
};

// One expert's projection (after "model.layers.N."): "<prefix>E<suffix>" ->
// expert E of the stacked GGUF tensor (after "blk.N.").
struct ExpertName {
  std::string_view prefix;
  std::string_view suffix;
  std::string_view gguf;
};
constexpr ExpertName kExpertNames[] = {
    {"block_sparse_moe.experts.", ".w1.weight", "ffn_gate_exps.weight"},  // Mixtral
    {"block_sparse_moe.experts.", ".w3.weight", "ffn_up_exps.weight"},
    {"block_sparse_moe.experts.", ".w2.weight", "ffn_down_exps.weight"},
    {"mlp.experts.", ".gate_proj.weight", "ffn_gate_exps.weight"},  // Qwen2-MoE, Qwen3-MoE
    {"mlp.experts.", ".up_proj.weight", "ffn_up_exps.weight"},
    {"mlp.experts.", ".down_proj.weight", "ffn_down_exps.weight"},
};

// A decimal number of at most 9 digits that is all of `text`.
bool parse_index(std::string_view text, unsigned& value) {
  if (text.empty() || text.size() > 9) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

// The experts of one projection, by expert index, stacked into one
// [experts, out, in] tensor: folio's expert ops (Backend::expert_matmul)
// read a stacked tensor, as GGUF files store them, and Hugging Face
// checkpoints store one tensor per expert. This copy, made once at load, is
// the only place HF weights are not used in place.
void add_stacked_experts(Weights& w, const std::string& dir, const std::string& name,
                         const std::map<std::int64_t, const SafetensorsTensor*>& experts) {
  const SafetensorsTensor& first = *experts.begin()->second;
  const auto num_experts = static_cast<std::int64_t>(experts.size());
  if (experts.rbegin()->first != num_experts - 1)
    fail("{}: the experts of {} are numbered up to {} but only {} are present; an expert's tensor is missing", dir,
         name, experts.rbegin()->first, num_experts);
  if (first.num_dims != 2)
    fail("{}: expert tensor {} must be 2-D, it has {} dimensions", dir, first.name, first.num_dims);
  for (const auto& [e, t] : experts) {
    if (t->dtype != first.dtype || t->num_dims != 2 || t->shape[0] != first.shape[0] || t->shape[1] != first.shape[1])
      fail("{}: expert tensor {} differs in type or shape from {}; every expert of a projection must match", dir,
           t->name, first.name);
  }
  // One host copy of the file's bytes, expert after expert, until the backend loads it.
  Buffer storage = host_buffer(first.size_bytes * static_cast<std::size_t>(num_experts));
  auto* bytes = static_cast<std::uint8_t*>(storage.data());
  for (const auto& [e, t] : experts)
    std::memcpy(bytes + static_cast<std::size_t>(e) * first.size_bytes, t->data, first.size_bytes);
  Tensor stacked = storage.view(first.dtype, {num_experts, first.shape[0], first.shape[1]});
  FOLIO_CHECK(stacked.bytes() == storage.size());
  w.add_owned(name, stacked, std::move(storage));
}

bool is_norm(std::string_view gguf_name) { return gguf_name.find("norm") != std::string_view::npos; }

// A vision-language checkpoint's language model, under the names of a text
// one: transformers 5 saves it as model.language_model.* (lm_head at the
// top), earlier ones as language_model.model.* and language_model.lm_head.*.
std::string text_model_name(std::string_view hf) {
  constexpr std::string_view kPrefixes[][2] = {{"model.language_model.", "model."},
                                               {"language_model.model.", "model."},
                                               {"language_model.lm_head.", "lm_head."}};
  for (const auto& [from, to] : kPrefixes)
    if (hf.starts_with(from)) return std::string(to) + std::string(hf.substr(from.size()));
  return std::string(hf);
}

bool is_vision_tensor(std::string_view hf) {
  for (std::string_view prefix : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                  "model.multi_modal_projector."})
    if (hf.starts_with(prefix)) return true;
  return false;
}

}  // namespace

bool split_hf_layer_name(std::string_view hf, unsigned& layer, std::string_view& rest) {
  constexpr std::string_view kLayers = "model.layers.";
  if (!hf.starts_with(kLayers)) return false;
  hf.remove_prefix(kLayers.size());
  const std::size_t dot = hf.find('.');
  if (dot == std::string_view::npos || !parse_index(hf.substr(0, dot), layer)) return false;
  rest = hf.substr(dot + 1);
  return true;
}

std::string gguf_tensor_name(std::string_view hf_name, bool gemma_norms) {
  const std::string text = text_model_name(hf_name);
  const std::string_view hf = text;
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  unsigned layer = 0;
  std::string_view rest;
  if (!split_hf_layer_name(hf, layer, rest)) return "";
  if (rest == "post_attention_layernorm.weight")
    return fmt::format("blk.{}.{}", layer, gemma_norms ? "post_attention_norm.weight" : "ffn_norm.weight");
  for (const LayerName& n : kLayerNames)
    if (rest == n.hf) return fmt::format("blk.{}.{}", layer, n.gguf);
  return "";
}

std::optional<HfExpertTensor> hf_expert_tensor(std::string_view hf_name) {
  const std::string text = text_model_name(hf_name);
  const std::string_view hf = text;
  unsigned layer = 0;
  std::string_view rest;
  if (!split_hf_layer_name(hf, layer, rest)) return std::nullopt;
  for (const ExpertName& n : kExpertNames) {
    if (rest.size() <= n.prefix.size() + n.suffix.size() || !rest.starts_with(n.prefix) || !rest.ends_with(n.suffix))
      continue;
    unsigned expert = 0;
    if (!parse_index(rest.substr(n.prefix.size(), rest.size() - n.prefix.size() - n.suffix.size()), expert)) continue;
    return HfExpertTensor{fmt::format("blk.{}.{}", layer, n.gguf), static_cast<std::int64_t>(expert)};
  }
  return std::nullopt;
}

bool is_model_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::shared_ptr<const HfCheckpoint> HfCheckpoint::open(const std::string& dir) {
  const fs::path root(dir);
  // A vision-language checkpoint: folio reads its language model.
  std::shared_ptr<HfCheckpoint> c(
      new HfCheckpoint(dir, HfConfig::open((root / "config.json").string()).with_text_config_raised()));

  // The shards, each with the tensors the index says it holds (one file: all).
  std::map<std::string, std::vector<std::string>> listed;  // shard -> tensor names
  const fs::path index = root / kIndexFile;
  const bool has_index = fs::exists(index);
  if (has_index) {
    const nlohmann::json json = read_json_object(index.string());
    auto map = json.find("weight_map");
    if (map == json.end() || !map->is_object() || map->empty())
      fail("{} has no weight_map object naming each tensor's shard", index.string());
    for (const auto& [tensor, shard] : map->items()) {
      if (!shard.is_string()) fail("{}: the shard of {} is not a file name", index.string(), tensor);
      const std::string name = shard.get<std::string>();
      check_shard_name(name, index);
      listed[name].push_back(tensor);
    }
  } else if (fs::exists(root / kSingleFile)) {
    listed[std::string(kSingleFile)];
  } else {
    bool pickles = false;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root, ec)) pickles |= e.path().extension() == ".bin";
    fail("{} holds neither {} nor {}{}", dir, kSingleFile, kIndexFile,
         pickles ? "; folio reads safetensors only: save the model with safe_serialization=True" : "");
  }

  for (const auto& [shard_name, names] : listed) {
    auto shard = std::make_shared<const SafetensorsFile>(SafetensorsFile::open((root / shard_name).string()));
    for (const SafetensorsTensor& t : shard->tensors()) {
      if (!c->tensors_.emplace(t.name, &t).second) fail("{}: tensor {} is in two shards", dir, t.name);
    }
    if (has_index) {
      for (const std::string& name : names)
        if (shard->find_tensor(name) == nullptr)
          fail("{} lists tensor {} in {}, which does not hold it", index.string(), name, shard_name);
      if (shard->tensors().size() != names.size())
        fail("{} holds {} tensors but {} lists {} for it", shard->path(), shard->tensors().size(), index.string(),
             names.size());
    }
    c->shards_.push_back(std::move(shard));
  }
  // Codes without a quantization_config have no meaning: say so before any
  // tensor is mapped, whichever comes first in the file.
  if (c->quantization_.method == HfQuantMethod::kNone)
    for (const SafetensorsTensor* t : c->tensors())
      if (t->stored == SafetensorsDtype::F8_E4M3 || t->stored == SafetensorsDtype::U8)
        fail("{}: tensor {} is {} but config.json has no {} quantization_config; without one its scales are unknown",
             dir, t->name, name(t->stored), t->stored == SafetensorsDtype::F8_E4M3 ? "FP8" : "bitsandbytes");
  return c;
}

const SafetensorsTensor* HfCheckpoint::find_tensor(std::string_view name) const {
  auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : it->second;
}

std::vector<const SafetensorsTensor*> HfCheckpoint::tensors() const {
  std::vector<const SafetensorsTensor*> out;
  for (const auto& shard : shards_)
    for (const SafetensorsTensor& t : shard->tensors()) out.push_back(&t);
  return out;
}

std::uint64_t HfCheckpoint::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& shard : shards_)
    for (const SafetensorsTensor& t : shard->tensors()) n += t.size_bytes;
  return n;
}

Weights hf_weights(std::shared_ptr<const HfCheckpoint> checkpoint, const ArchEntry& arch) {
  const HfCheckpoint& c = *checkpoint;
  Weights w(c.dir(), checkpoint);
  const bool tied = c.config().get_bool("tie_word_embeddings", false);
  std::map<std::string, std::map<std::int64_t, const SafetensorsTensor*>> experts;  // stacked name -> experts
  const HfQuantization& quantization = c.quantization();
  for (const SafetensorsTensor* t : c.tensors()) {
    if (is_quantization_tensor(quantization, t->name)) continue;  // read with its weight
    const bool quantized = is_quantized_weight(quantization, *t);
    if (const std::optional<HfExpertTensor> expert = hf_expert_tensor(t->name)) {
      if (quantized)
        fail("{}: expert tensor {} is quantized ({}); folio does not yet widen quantized experts", c.dir(), t->name,
             quantization.describe());
      experts[expert->gguf_name][expert->expert] = t;
      continue;
    }
    const std::string name = gguf_tensor_name(t->name, arch.hf_gemma_norms || arch.hf_post_attention_norm);
    if (name.empty() && is_vision_tensor(t->name)) continue;  // the language model is what folio runs
    if (name.empty() && arch.hf_tensor != nullptr && arch.hf_tensor(w, c, *t)) continue;
    if (name.empty()) {
      if (t->name.ends_with("rotary_emb.inv_freq")) continue;  // recomputed from the config
      fail("{}: tensor {} has no place in folio's {} architecture; the checkpoint may be of another model class",
           c.dir(), t->name, arch.name);
    }
    if (name == "output.weight" && tied) continue;  // HF reads the embeddings, as folio does without it
    if (quantized) {
      WidenedWeight widened = widen_weight(c, *t);
      w.add_owned(name, widened.view, std::move(widened.storage));
      continue;
    }
    if (t->stored == SafetensorsDtype::F8_E4M3 || t->stored == SafetensorsDtype::U8)
      fail("{}: tensor {} has dtype {}, which only a quantization_config explains ({})", c.dir(), t->name,
           folio::name(t->stored), quantization.describe());
    Tensor view;
    view.data = const_cast<std::uint8_t*>(t->data);  // read-only mapping: ops never write weights
    view.dtype = t->dtype;
    view.ndim = t->num_dims;
    for (int d = 0; d < t->num_dims; ++d) view.shape[d] = t->shape[d];
    const bool offset_norm = arch.hf_gemma_norms && is_norm(name);
    if (view.ndim != 1 || (view.dtype == DType::F32 && !offset_norm)) {
      w.add(name, view);
      continue;
    }
    // Norms and biases: the ops read them as f32 (a host copy of the file's
    // numbers, until the backend loads it).
    const std::int64_t n = view.shape[0];
    Buffer storage = host_buffer(static_cast<std::size_t>(n) * sizeof(float));
    auto* values = static_cast<float*>(storage.data());
    dequantize_row(t->dtype, t->data, values, n);
    if (offset_norm)
      for (std::int64_t i = 0; i < n; ++i) values[i] += 1.0f;
    const Tensor copy = storage.view(DType::F32, {n});
    w.add_owned(name, copy, std::move(storage));
  }
  for (const auto& [name, by_expert] : experts) add_stacked_experts(w, c.dir(), name, by_expert);
  return w;
}

}  // namespace folio
