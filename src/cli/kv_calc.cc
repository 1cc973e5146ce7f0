// `folio kv-calc MODEL`: how a model's weights and KV cache fit a device, for
// a number of users at a context length, and the bandwidth bound on decode.
// Every figure is printed with the arithmetic that produced it.
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "kv/capacity_planner.h"
#include "kv/capacity_report.h"
#include "model/arch/registry.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "tensor/kv_dtype.h"

namespace folio::cli {
namespace {

struct Options {
  std::string model;
  std::string device;
  std::string mem;
  std::string bw;
  std::string weights;
  std::string kv = "f16";
  std::int64_t ctx = 4096;
  std::int64_t users = 1;
  int block_size = kDefaultBlockSize;
  std::string reserve = "10%";
  bool json = false;
  bool list = false;
};

std::string list_names() {
  std::string s = "models:";
  for (const auto& m : model_presets()) s += " " + m.name;
  s += "\ndevices:";
  for (const auto& d : device_presets())
    s += fmt::format(" {} ({} GB, {})", d.name, d.memory_bytes / 1'000'000'000, rate_text(d.bandwidth_bytes_per_s));
  s += "\nKV formats:";
  for (const auto& k : kv_number_format_names()) s += " " + k;
  return s;
}

NumberFormat weight_format(const std::string& name) {
  if (auto f = weight_number_format(name)) return *f;
  fail("unknown weight format \"{}\"; use {}, ...", name, fmt::join(weight_number_format_names(), ", "));
}

struct Model {
  ModelShape shape;
  std::optional<std::int64_t> file_weight_bytes;  // a model file's tensors, as stored
  std::string source;
};

Model load_model(const std::string& name) {
  if (auto preset = find_model_preset(name)) return {*preset, std::nullopt, "preset"};
  if (!std::filesystem::is_regular_file(name))
    fail("\"{}\" is neither a model preset nor a GGUF file; presets are:\n{}", name, list_names());
  // TODO(kv-calc): safetensors configs once the model module reads them.
  const GgufFile f = GgufFile::open(name);
  ModelConfig c = ModelConfig::from_gguf(f);
  // The architecture's own keys: layers of two shapes, a KV cache shared by
  // later layers (Gemma 4), which change what a token caches.
  if (const ArchEntry* arch = find_arch(c.architecture)) arch->configure(c, f);
  Model m;
  m.source = "file " + name;
  m.shape = model_shape(c);
  const std::string a = c.architecture + ".";
  // A latent-attention file (deepseek2) reads as one KV head of kv_lora +
  // rope dims with values of kv_lora, which is what folio's engine caches
  // today (DeepseekModel: the latent again as the value row), so a file is
  // counted as folio would hold it, not as one shared latent row.
  m.shape.num_experts = static_cast<int>(f.get_int(a + "expert_count", 0));
  std::int64_t bytes = 0;
  for (const auto& t : f.tensors()) {
    m.shape.num_params += t.num_elements;
    bytes += static_cast<std::int64_t>(t.size_bytes);
  }
  m.file_weight_bytes = bytes;
  return m;
}

void run(const Options& o) {
  if (o.list) {
    fmt::print("{}\n", list_names());
    return;
  }
  if (o.model.empty()) fail("name a model preset or a GGUF file; `folio kv-calc --list` shows the presets");
  const Model model = load_model(o.model);
  // "q8_0" for both, or "K:V" such as "q8_0:f16", as --kv-cache-dtype of run and serve.
  const auto kv = kv_number_formats(o.kv);
  if (!kv)
    fail("unknown KV cache type \"{}\"; use one of: {}, or K:V such as q8_0:f16", o.kv,
         fmt::join(kv_number_format_names(), ", "));
  const std::string& kv_name = kv->name;

  CapacityQuery q;
  q.model = model.shape;
  q.kv_format = kv->k;
  if (kv->v.name != kv->k.name) q.v_format = kv->v;
  q.context_tokens = o.ctx;
  q.num_users = o.users;
  q.block_size = o.block_size;
  std::optional<NumberFormat> weights;  // nullopt: the file's own tensors
  if (model.file_weight_bytes && o.weights.empty()) {
    q.weight_bytes = *model.file_weight_bytes;
  } else {
    weights = weight_format(o.weights.empty() ? "f16" : o.weights);
    q.weight_bytes = weight_bytes(model.shape, *weights);
  }

  // The device: a preset, explicit figures, or none (model figures only).
  bool have_device = false;
  if (!o.device.empty()) {
    auto d = find_device_preset(o.device);
    if (!d) fail("unknown device \"{}\"; give --mem 80GB --bw 3.35TB/s instead, or one of:\n{}", o.device, list_names());
    q.device = *d;
    have_device = true;
  }
  if (!o.mem.empty()) {
    auto m = parse_byte_size(o.mem);
    if (!m || *m <= 0) fail("--mem \"{}\" is not a size; write it with a unit: 80GB, 24GiB", o.mem);
    if (!have_device) q.device.name = "custom";
    q.device.memory_bytes = *m;
    have_device = true;
  }
  if (!o.bw.empty()) {
    auto b = parse_bandwidth(o.bw);
    if (!b || *b <= 0) fail("--bw \"{}\" is not a bandwidth; write it with a unit: 3.35TB/s, 900GB/s", o.bw);
    if (!have_device) fail("--bw needs a memory size too: add --mem 80GB or --device H100");
    q.device.bandwidth_bytes_per_s = *b;
  }
  if (!o.reserve.empty() && o.reserve.back() == '%') {
    try {
      q.reserve_fraction = std::stod(o.reserve.substr(0, o.reserve.size() - 1)) / 100.0;
    } catch (const std::exception&) {
      fail("--reserve \"{}\" is not a percentage; write 10% or a size such as 4GB", o.reserve);
    }
  } else if (auto r = parse_byte_size(o.reserve)) {
    q.reserve_bytes = *r;
  } else {
    fail("--reserve \"{}\" is neither a percentage nor a size; write 10% or 4GB", o.reserve);
  }
  if (!have_device) q.device = DeviceSpec{"none", 1, 0};  // model figures only; the rest is not printed
  const CapacityPlan p = plan_capacity(q);
  const ModelShape& m = model.shape;

  if (o.json) {
    nlohmann::json j;
    j["model"] = {{"name", m.name}, {"source", model.source}, {"num_params", m.num_params},
                  {"num_layers", m.num_layers}, {"num_kv_heads", m.num_kv_heads}, {"head_dim", m.head_dim},
                  {"kv_latent_dim", m.kv_latent_dim}, {"num_experts", m.num_experts}};
    j["kv_format"] = kv_name;
    j["context_tokens"] = q.context_tokens;
    j["num_users"] = q.num_users;
    j["block_size"] = q.block_size;
    j["weight_bytes"] = p.weight_bytes;
    j["kv_bytes_per_token"] = p.kv_bytes_per_token;
    j["tokens_per_user"] = p.tokens_per_user;
    j["kv_bytes_per_user"] = p.kv_bytes_per_user;
    j["kv_bytes_total"] = p.kv_bytes_total;
    if (have_device) {
      j["device"] = {{"name", q.device.name}, {"memory_bytes", q.device.memory_bytes},
                     {"bandwidth_bytes_per_s", q.device.bandwidth_bytes_per_s}};
      j["reserve_bytes"] = p.reserve_bytes;
      j["kv_budget_bytes"] = p.kv_budget_bytes;
      j["needed_bytes"] = p.needed_bytes;
      j["fits"] = p.fits;
      j["max_users"] = p.max_users;
      j["max_context_tokens"] = p.max_context_tokens;
      if (q.device.bandwidth_bytes_per_s > 0) {
        j["bytes_per_step"] = p.bytes_per_step;
        j["decode_tokens_per_s_per_user"] = p.decode_tokens_per_s_per_user;
        j["decode_tokens_per_s_total"] = p.decode_tokens_per_s_total;
      }
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }

  fmt::print("model   {} ({}): {} params, {} layers\n", m.name, model.source, params_text(m.num_params), m.num_layers);
  if (have_device) {
    fmt::print("device  {}: {} memory{}; {} kept back for activations and runtime ({})\n", q.device.name,
               decimal_gb(q.device.memory_bytes),
               q.device.bandwidth_bytes_per_s > 0 ? " at " + rate_text(q.device.bandwidth_bytes_per_s) : "",
               decimal_gb(p.reserve_bytes), q.reserve_bytes ? "--reserve" : o.reserve + " of memory, --reserve");
  }
  fmt::print("load    {} user(s) x {} tokens of context; KV in {}, blocks of {} tokens\n\n", grouped(q.num_users),
             grouped(q.context_tokens), kv_name, q.block_size);

  const CapacityReport report = capacity_report(q, p, weights, have_device);
  for (const CapacityRow& r : report.rows) fmt::print("{:<15}{}\n{:<15}  = {}\n", r.name, r.value, "", r.how);
  for (std::string note : report.notes) {
    for (std::size_t at = note.find('\n'); at != std::string::npos; at = note.find('\n', at + 7))
      note.insert(at + 1, 6, ' ');  // under the text after "note: "
    fmt::print("\nnote: {}\n", note);
  }
  if (!have_device) fmt::print("\n(add --device H100, or --mem 80GB --bw 3.35TB/s, for fit and speed)\n");
}

}  // namespace

void add_kv_calc(CLI::App& app) {
  auto* cmd = app.add_subcommand("kv-calc", "Size weights and KV cache for a model, device, context and users");
  auto o = std::make_shared<Options>();
  cmd->add_option("model", o->model, "Model preset (see --list) or GGUF file");
  cmd->add_option("-d,--device", o->device, "Device preset: H200, H100, A100, RTX-4090");
  cmd->add_option("--mem", o->mem, "Device memory, with a unit: 80GB, 24GiB (overrides the preset)");
  cmd->add_option("--bw", o->bw, "Memory bandwidth, with a unit: 3.35TB/s (overrides the preset)");
  cmd->add_option("-w,--weights", o->weights,
                  "Weight format: f16, bf16, fp8, fp8_block128, q8_0, q4_k, q4_0, nf4, nf4_dq, ... (default f16; a file's "
                  "own size)");
  cmd->add_option("--kv-cache-dtype,--kv", o->kv, kKvCacheDTypeHelp)->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "Context length per user, in tokens")->capture_default_str();
  cmd->add_option("-u,--users", o->users, "Number of users (sequences) at once")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "KV block size in tokens")->capture_default_str();
  cmd->add_option("--reserve", o->reserve, "Memory kept back for activations and runtime: 10% or 4GB")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print JSON for scripts");
  cmd->add_flag("--list", o->list, "List the model, device and KV format presets");
  cmd->callback([o] { run(*o); });
}

}  // namespace folio::cli
