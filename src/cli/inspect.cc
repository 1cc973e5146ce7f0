// `folio inspect MODEL`: what a model (a GGUF file or a Hugging Face
// directory) holds, checked and summarised: architecture and
// hyper-parameters, tokenizer, chat template, tensors, parameter count,
// weight bytes and KV bytes per token.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "cli/commands.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"
#include "model/model_config.h"
#include "model/rotary.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab.h"

namespace folio::cli {
namespace {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:.{}f} {}", bytes, u == 0 ? 0 : 2, units[u]);
}

std::string with_commas(std::uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

void print_config(const ModelConfig& c, bool supported) {
  fmt::print("model: {}\n", c.name);
  const ArchEntry* arch = find_arch(c.architecture);
  fmt::print("  architecture        {}{}{}\n", c.architecture,
             arch != nullptr && !arch->family.empty() ? fmt::format(" ({})", arch->family) : "",
             supported ? "" : " (not supported by this build)");
  fmt::print("  layers              {}\n", c.num_layers);
  fmt::print("  hidden size         {}\n", c.hidden_size);
  fmt::print("  FFN size            {}\n", c.intermediate_size);
  if (c.is_moe()) {
    fmt::print("  experts             {} of {} per token, FFN size {}, weights {}\n", c.num_experts_used, c.num_experts,
               c.expert_intermediate_size, c.expert_weights_norm ? "renormalised over the chosen" : "as routed");
    if (c.grouped_routing)
      fmt::print("  router              {}, {} groups scored by their {} of which {} kept, weights x{:g}{}\n",
                 c.routing.sigmoid ? "sigmoid" : "softmax", c.routing.num_groups,
                 c.routing.group_top2 ? "top two" : "best expert", c.routing.groups_used, c.routing.scale,
                 c.num_dense_layers > 0 ? fmt::format("; the first {} layers dense", c.num_dense_layers) : "");
    if (c.shared_expert_intermediate_size > 0)
      fmt::print("  shared expert       FFN size {}, {}\n", c.shared_expert_intermediate_size,
                 c.grouped_routing ? "added without a gate" : "sigmoid-gated");
  }
  fmt::print("  attention heads     {} (KV heads {}, head size {}{})\n", c.num_heads, c.num_kv_heads, c.head_dim,
             c.value_head_dim != c.head_dim ? fmt::format(", value size {}", c.value_head_dim) : "");
  fmt::print("  context length      {}{}\n", c.context_length,
             c.context_length != c.rope.original_context && c.rope.original_context > 0
                 ? fmt::format(" (trained {})", c.rope.original_context)
                 : "");
  fmt::print("  vocabulary          {}\n", c.vocab_size);
  fmt::print("  RMSNorm epsilon     {:g}\n", c.rms_norm_eps);
  fmt::print("  RoPE                {}, base {:g}, {} dims\n", c.rope.style == RopeStyle::kNeox ? "neox" : "normal",
             c.rope.base, c.rope.dim);
  if (c.rope.scaling != RopeScaling::kNone) fmt::print("  RoPE scaling        {}\n", describe_rope_scaling(c));
  if (c.rope.temperature_beta != 0.0f)
    fmt::print("  query temperature   1 + {:g} ln(1 + floor((pos + {:g}) / {}))\n", c.rope.temperature_beta,
               c.rope.temperature_offset, c.rope.temperature_length);
  if (std::count(c.rope_skipped.begin(), c.rope_skipped.end(), true) > 0) {
    std::string layers;
    for (std::size_t l = 0; l < c.rope_skipped.size(); ++l)
      if (c.rope_skipped[l]) layers += fmt::format("{}{}", layers.empty() ? "" : ", ", l);
    fmt::print("  layers without RoPE {}\n", layers);
  }
  if (c.embedding_scale != 1.0f || c.residual_scale != 1.0f || c.logit_scale != 1.0f)
    fmt::print("  multipliers         embeddings x{:g}, block outputs x{:g}, logits x{:g}\n", c.embedding_scale,
               c.residual_scale, c.logit_scale);
  if (c.attention_softcap > 0.0f || c.final_logit_softcap > 0.0f)
    fmt::print("  soft-capping        attention scores {:g}, final logits {:g} (0: none)\n", c.attention_softcap,
               c.final_logit_softcap);
  bool sliding = false;
  for (auto w : c.sliding_window) sliding = sliding || w > 0;
  if (sliding) {
    std::int64_t count = 0, window = 0;
    for (auto w : c.sliding_window)
      if (w > 0) ++count, window = w;
    fmt::print("  sliding window      {} tokens on {} of {} layers\n", window, count, c.num_layers);
  }
  if (c.num_recurrent_layers() > 0)
    fmt::print("  linear attention    {} of {} layers: {} key heads of {}, {} value heads of {}, conv kernel {}; "
               "state {} bytes per sequence (f32), whatever its length\n",
               c.num_recurrent_layers(), c.num_layers, c.linear.num_key_heads, c.linear.key_dim,
               c.linear.num_value_heads, c.linear.value_dim, c.linear.conv_kernel,
               with_commas(c.recurrent_state_bytes_per_seq()));
  if (c.is_mla()) {
    fmt::print("  latent attention    kv_lora {}, rotary key {}, q_lora {}, expanded heads {} + {} (value {})\n",
               c.kv_lora_rank, c.rope.dim, c.q_lora_rank, c.qk_nope_head_dim, c.rope.dim, c.mla_value_head_dim);
    fmt::print("  KV bytes per token  {} layers x ({} key row + {} value row) x bytes = {} (f16), {} (f32)\n",
               c.num_layers, c.head_dim, c.value_head_dim,
               with_commas(static_cast<std::uint64_t>(c.kv_bytes_per_token(2))),
               with_commas(static_cast<std::uint64_t>(c.kv_bytes_per_token(4))));
    return;
  }
  std::int64_t writing = 0, numbers = 0;  // layers that write a cache; their K and V numbers a token
  for (std::int64_t l = 0; l < c.num_layers; ++l)
    if (c.writes_kv(l)) ++writing, numbers += c.num_kv_heads_of(l) * (c.head_dim_of(l) + c.value_head_dim_of(l));
  if (writing != c.num_layers || !c.layer_head_dim.empty() || !c.layer_num_kv_heads.empty())
    fmt::print("  KV bytes per token  {} K and V numbers (the {} of {} layers that write a cache) x bytes = {} (f16), "
               "{} (f32)\n",
               numbers, writing, c.num_layers, with_commas(static_cast<std::uint64_t>(c.kv_bytes_per_token(2))),
               with_commas(static_cast<std::uint64_t>(c.kv_bytes_per_token(4))));
  else
    fmt::print("  KV bytes per token  2 x {} layers x {} KV heads x {} dims x bytes = {} (f16), {} (f32)\n",
               c.num_layers, c.num_kv_heads, c.head_dim,
               with_commas(static_cast<std::uint64_t>(c.kv_bytes_per_token(2))),
               with_commas(static_cast<std::uint64_t>(c.kv_bytes_per_token(4))));
}

void print_config(const GgufFile& f) {
  ModelConfig c = ModelConfig::from_gguf(f);
  const ArchEntry* arch = find_arch(c.architecture);
  if (arch != nullptr) arch->configure(c, f);
  // llama.cpp's Phi-3 files name no scaling: its factors' tensors say LongRoPE.
  if (c.rope.scaling == RopeScaling::kNone && f.find_tensor("rope_factors_long.weight") != nullptr) {
    c.rope.scaling = RopeScaling::kLongRope;
    c.rope.factor =
        static_cast<float>(static_cast<double>(c.context_length) / static_cast<double>(c.rope.original_context));
  }
  print_config(c, arch != nullptr);
}

void print_vocab(const Vocab& v) {
  fmt::print("tokenizer: {} ({}), pre-tokenizer {}, {} tokens\n",
             v.kind == VocabKind::kBytePairGpt2 ? "byte-level BPE" : "SentencePiece BPE", v.model, v.pre, v.size());
  auto token = [&](TokenId id) { return id >= 0 ? fmt::format("{} {:?}", id, v.tokens[id]) : std::string("none"); };
  fmt::print("  BOS {}, EOS {}, add BOS {}, add EOS {}\n", token(v.bos_id), token(v.eos_id), v.add_bos, v.add_eos);
}

void print_tokenizer(const GgufFile& f) {
  if (f.find("tokenizer.ggml.model") == nullptr) {
    fmt::print("tokenizer: none\n");
    return;
  }
  print_vocab(Vocab::from_gguf(f));
  const GgufValue* tmpl = f.find("tokenizer.chat_template");
  fmt::print("  chat template       {}\n",
             tmpl ? fmt::format("present ({} bytes)", tmpl->as_string("tokenizer.chat_template").size())
                  : std::string("absent (ChatML is used)"));
}

void print_tensors(const GgufFile& f, bool list) {
  std::uint64_t params = 0, bytes = 0;
  std::map<std::string, std::pair<int, std::uint64_t>> by_type;
  for (const auto& t : f.tensors()) {
    params += static_cast<std::uint64_t>(t.num_elements);
    bytes += t.size_bytes;
    auto& e = by_type[std::string(name(t.type))];
    ++e.first;
    e.second += t.size_bytes;
  }
  fmt::print("weights: {} tensors, {} parameters, {} ({:.2f} bits per weight)\n", f.tensors().size(),
             with_commas(params), human_bytes(static_cast<double>(bytes)),
             params ? 8.0 * static_cast<double>(bytes) / static_cast<double>(params) : 0.0);
  for (const auto& [type, e] : by_type)
    fmt::print("  {:<6} {:>4} tensors  {:>12}\n", type, e.first, human_bytes(static_cast<double>(e.second)));
  if (!list) return;
  fmt::print("tensors:\n");
  for (const auto& t : f.tensors()) {
    std::string shape;
    for (int d = t.num_dims - 1; d >= 0; --d) shape += fmt::format("{}{}", shape.empty() ? "" : " x ", t.shape[d]);
    fmt::print("  {:<32} {:<6} {:<18} {:>12}\n", t.name, name(t.type), shape, with_commas(t.size_bytes));
  }
}

void print_hf(const std::string& dir, bool list) {
  const auto c = HfCheckpoint::open(dir);
  fmt::print("directory: {} (Hugging Face, {} safetensors file{}, {})\n", dir, c->shards().size(),
             c->shards().size() == 1 ? "" : "s", human_bytes(static_cast<double>(c->total_bytes())));
  const std::string model_class = c->config().architecture();
  const ArchEntry* arch = find_hf_arch(model_class);
  ModelConfig config = ModelConfig::from_hf(c->config());
  config.architecture = arch ? std::string(arch->name) : model_class;
  config.name = model_class;
  if (arch != nullptr) arch->configure_hf(config, c->config());
  print_config(config, arch != nullptr);
  Vocab v = Vocab::from_hf(dir, config.vocab_size);
  print_vocab(v);
  const ChatTemplate chat = ChatTemplate::from_hf(dir);
  fmt::print("  chat template       {}\n", chat.source() == ChatTemplate::kChatMlSource
                                                 ? std::string("absent (ChatML is used)")
                                                 : fmt::format("present ({} bytes)", chat.source().size()));
  // A quantized weight counts its logical numbers and, in its bytes, every
  // scale and quant-state tensor that belongs to it.
  struct TypeTotal {
    int count = 0;
    std::uint64_t params = 0, bytes = 0;
  };
  const HfQuantization& quant = c->quantization();
  std::uint64_t params = 0, bytes = 0;
  std::map<std::string, TypeTotal> by_type;
  const auto tensors = c->tensors();
  for (const SafetensorsTensor* t : tensors) {
    if (is_quantization_tensor(quant, t->name)) continue;
    std::string type(name(t->stored));
    std::uint64_t n = static_cast<std::uint64_t>(t->num_elements), b = t->size_bytes;
    if (is_quantized_weight(quant, *t)) {
      const QuantizedWeightSize s = quantized_weight_size(*c, *t);
      type = s.format;
      n = static_cast<std::uint64_t>(s.num_elements);
      b = s.bytes;
    } else if (quant.method == HfQuantMethod::kMxfp4 && t->name.ends_with("_blocks")) {
      // Two 4-bit codes a byte, and one scale byte per 32 (the _scales beside it).
      type = "mxfp4";
      n *= 2;
      b += b / 16;
    }
    params += n;
    bytes += b;
    auto& e = by_type[type];
    ++e.count;
    e.params += n;
    e.bytes += b;
  }
  if (quant.method == HfQuantMethod::kMxfp4)
    fmt::print("quantization: quant_method mxfp4; folio repacks these experts into GGUF MXFP4 blocks at load (the "
               "same 4.25 bits per weight)\n");
  else if (quant.method != HfQuantMethod::kNone)
    fmt::print("quantization: quant_method {} ({}); folio widens these weights to {} at load\n", quant.quant_method,
               quant.describe(), quant.method == HfQuantMethod::kFp8 ? "bf16" : "the quant state's dtype");
  const auto bits = [](std::uint64_t b, std::uint64_t n) {
    return n ? 8.0 * static_cast<double>(b) / static_cast<double>(n) : 0.0;
  };
  fmt::print("weights: {} tensors, {} parameters, {} ({:.3f} bits per weight)\n", tensors.size(), with_commas(params),
             human_bytes(static_cast<double>(bytes)), bits(bytes, params));
  for (const auto& [type, e] : by_type)
    fmt::print("  {:<20} {:>4} tensors  {:>12}  {:.3f} bits per weight\n", type, e.count,
               human_bytes(static_cast<double>(e.bytes)), bits(e.bytes, e.params));
  if (!list) return;
  fmt::print("tensors:\n");
  for (const SafetensorsTensor* t : tensors) {
    std::string shape;
    for (int d = 0; d < t->num_dims; ++d) shape += fmt::format("{}{}", shape.empty() ? "" : " x ", t->shape[d]);
    std::string gguf = gguf_tensor_name(t->name, arch != nullptr && (arch->hf_gemma_norms || arch->hf_post_attention_norm));
    if (const auto expert = hf_expert_tensor(t->name)) gguf = fmt::format("{}[{}]", expert->gguf_name, expert->expert);
    fmt::print("  {:<48} {:<24} {:<6} {:<14} {:>12}\n", t->name, gguf.empty() ? "-" : gguf, name(t->stored), shape,
               with_commas(t->size_bytes));
  }
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show a model's architecture, hyper-parameters, tokenizer and tensors");
  auto model = std::make_shared<std::string>();
  auto show_all = std::make_shared<bool>(false);
  auto no_tensors = std::make_shared<bool>(false);
  cmd->add_option("model,-m,--model", *model, "GGUF file or Hugging Face directory (default: the default model)");
  cmd->add_flag("--metadata", *show_all, "Also print every metadata key");
  cmd->add_flag("--no-tensors", *no_tensors, "Leave out the tensor table");
  cmd->callback([model, show_all, no_tensors] {
    const std::string path = resolve_model(*model);
    if (is_model_directory(path)) return print_hf(path, !*no_tensors);
    GgufFile f = GgufFile::open(path);
    fmt::print("file: {} (GGUF v{}, {})\n", path, f.version(), human_bytes(static_cast<double>(f.file_size())));
    print_config(f);
    print_tokenizer(f);
    print_tensors(f, !*no_tensors);
    if (*show_all) {
      fmt::print("metadata:\n");
      for (const auto& [key, value] : f.metadata()) fmt::print("  {} = {}\n", key, value.to_string());
    }
  });
}

}  // namespace folio::cli
