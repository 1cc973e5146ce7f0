// `folio kv-calc MODEL`: how a model's weights and KV cache fit a device, for
// a number of users at a context length, and the bandwidth bound on decode.
// Every figure is printed with the arithmetic that produced it.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "kv/capacity_planner.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "tensor/dtype.h"
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

// 68719476736 -> "68,719,476,736".
std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

std::string trimmed(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// Binary units; an exact count of the next smaller unit wins when short
// (1,677,721,600 B is "1,600 MiB", the classic "1.6 GB" per OPT-13B request).
std::string binary(std::int64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  const double b = static_cast<double>(bytes < 0 ? -bytes : bytes);
  int unit = 0;
  double v = b;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  if (unit > 0) {
    const double lower = b / std::pow(1024.0, unit - 1);
    if (lower == std::floor(lower) && lower < 10000 && v != std::floor(v)) {
      --unit;
      v = lower;
    }
  }
  const std::string sign = bytes < 0 ? "-" : "";
  if (v == std::floor(v)) return sign + grouped(static_cast<std::int64_t>(v)) + " " + kNames[unit];
  return sign + fmt::format("{:.2f} {}", v, kNames[unit]);
}

std::string decimal_gb(std::int64_t bytes) { return trimmed(static_cast<double>(bytes) / 1e9) + " GB"; }

// "68,719,476,736 B = 64 GiB = 68.72 GB"; decimal GB only from 1 GB up.
std::string bytes_text(std::int64_t bytes) {
  std::string s = grouped(bytes) + " B";
  if (std::abs(bytes) >= 1024) s += " = " + binary(bytes);
  if (std::abs(bytes) >= 1'000'000'000) s += " = " + decimal_gb(bytes);
  return s;
}

std::string params_text(std::int64_t n) {
  return n >= 1'000'000'000 ? trimmed(static_cast<double>(n) / 1e9) + " B"
                            : trimmed(static_cast<double>(n) / 1e6) + " M";
}

std::string rate_text(double bytes_per_s) {
  return bytes_per_s >= 1e12 ? trimmed(bytes_per_s / 1e12) + " TB/s" : trimmed(bytes_per_s / 1e9) + " GB/s";
}

// 40.76, 1,304
std::string tokens_per_s_text(double v) {
  return v >= 100 ? grouped(static_cast<std::int64_t>(std::llround(v))) : trimmed(v);
}

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

// Weight formats come from the GGUF type table, plus fp8 (a byte a number).
NumberFormat weight_format(const std::string& name) {
  if (name == "fp8" || name == "FP8") return NumberFormat{"fp8", 1, 1};
  if (auto t = parse_dtype(name)) {
    const DTypeInfo& i = info(*t);
    return NumberFormat{std::string(i.name), i.block_elems, i.block_bytes};
  }
  fail("unknown weight format \"{}\"; use f32, f16, bf16, fp8, q8_0, q6_k, q5_k, q4_k, q4_0, ...", name);
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
  const ModelConfig c = ModelConfig::from_gguf(f);
  Model m;
  m.source = "file " + name;
  m.shape.name = c.name;
  m.shape.num_layers = static_cast<int>(c.num_layers);
  m.shape.num_kv_heads = static_cast<int>(c.num_kv_heads);
  m.shape.head_dim = static_cast<int>(c.head_dim);
  m.shape.value_head_dim = static_cast<int>(c.value_head_dim);
  m.shape.max_context_tokens = c.context_length;
  const std::string a = c.architecture + ".";
  if (const std::int64_t rank = f.get_int(a + "attention.kv_lora_rank", 0); rank > 0)
    m.shape.kv_latent_dim = static_cast<int>(rank + f.get_int(a + "rope.dimension_count", 0));
  m.shape.num_experts = static_cast<int>(f.get_int(a + "expert_count", 0));
  std::int64_t bytes = 0;
  for (const auto& t : f.tensors()) {
    m.shape.num_params += t.num_elements;
    bytes += static_cast<std::int64_t>(t.size_bytes);
  }
  m.file_weight_bytes = bytes;
  return m;
}

// A row of `dims` numbers: "64 dims x 2 B (f16)", "64 dims x 34/32 B (q8_0,
// whole blocks)", "(64 dims x 1 B + 2 B scale) (fp8_e4m3)".
std::string row_text(const NumberFormat& f, int dims, const char* what = "dims") {
  const std::string per_number = f.block_elems == 1 ? fmt::format("{} B", f.block_bytes)
                                                    : fmt::format("{}/{} B", f.block_bytes, f.block_elems);
  const std::string how = f.block_elems == 1 ? f.name : f.name + ", whole blocks";
  if (f.row_scale_bytes > 0)
    return fmt::format("({} {} x {} + {} B scale) ({})", dims, what, per_number, f.row_scale_bytes, how);
  return fmt::format("{} {} x {} ({})", dims, what, per_number, how);
}

std::string kv_formula(const ModelShape& m, const NumberFormat& k, const NumberFormat& v) {
  if (m.kv_latent_dim > 0)
    return fmt::format("{} layers x {} (one latent row for K and V)", m.num_layers,
                       row_text(k, m.kv_latent_dim, "numbers"));
  const int vd = m.value_head_dim > 0 ? m.value_head_dim : m.head_dim;
  if (k.name != v.name || vd != m.head_dim)
    return fmt::format("{} layers x {} KV heads x (K {} + V {})", m.num_layers, m.num_kv_heads,
                       row_text(k, m.head_dim), row_text(v, vd));
  return fmt::format("2 (K, V) x {} layers x {} KV heads x {}", m.num_layers, m.num_kv_heads, row_text(k, m.head_dim));
}

void run(const Options& o) {
  if (o.list) {
    fmt::print("{}\n", list_names());
    return;
  }
  if (o.model.empty()) fail("name a model preset or a GGUF file; `folio kv-calc --list` shows the presets");
  const Model model = load_model(o.model);
  // "q8_0" for both, or "K:V" such as "q8_0:f16", as --kv-cache-dtype of run and serve.
  const auto colon = o.kv.find(':');
  const std::string k_name = o.kv.substr(0, colon);
  const std::string v_name = colon == std::string::npos ? k_name : o.kv.substr(colon + 1);
  const auto kv = kv_number_format(k_name);
  const auto v_kv = kv_number_format(v_name);
  if (!kv || !v_kv)
    fail("unknown KV cache type \"{}\"; use one of: {}, or K:V such as q8_0:f16", o.kv,
         fmt::join(kv_number_format_names(), ", "));
  const std::string kv_name = kv->name == v_kv->name ? kv->name : kv->name + ":" + v_kv->name;

  CapacityQuery q;
  q.model = model.shape;
  q.kv_format = *kv;
  if (v_kv->name != kv->name) q.v_format = *v_kv;
  q.context_tokens = o.ctx;
  q.num_users = o.users;
  q.block_size = o.block_size;
  std::string weight_how;
  if (model.file_weight_bytes && o.weights.empty()) {
    q.weight_bytes = *model.file_weight_bytes;
    weight_how = fmt::format("{} params as stored in the file", params_text(model.shape.num_params));
  } else {
    const NumberFormat w = weight_format(o.weights.empty() ? "f16" : o.weights);
    q.weight_bytes = weight_bytes(model.shape, w);
    weight_how = fmt::format("{} params x {} bits ({})", params_text(model.shape.num_params),
                             trimmed(w.bits_per_number()), w.name);
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

  auto row = [](const std::string& name, const std::string& value, const std::string& how) {
    fmt::print("{:<15}{}\n{:<15}  = {}\n", name, value, "", how);
  };
  row("weights", bytes_text(p.weight_bytes), weight_how);
  row("KV per token", bytes_text(p.kv_bytes_per_token), kv_formula(m, *kv, *v_kv));
  row("KV per user", bytes_text(p.kv_bytes_per_user),
      fmt::format("{} tokens{} x {}", grouped(p.tokens_per_user),
                  p.tokens_per_user != q.context_tokens ? " (context rounded up to whole blocks)" : "",
                  binary(p.kv_bytes_per_token)));
  row("KV for load", bytes_text(p.kv_bytes_total),
      fmt::format("{} user(s) x {}", grouped(q.num_users), binary(p.kv_bytes_per_user)));
  if (have_device) {
    row("needed", bytes_text(p.needed_bytes), "weights + KV for load + reserve");
    row("fits", p.fits ? "yes" : "no",
        p.fits ? fmt::format("{} spare of {}", decimal_gb(q.device.memory_bytes - p.needed_bytes),
                             decimal_gb(q.device.memory_bytes))
               : fmt::format("{} short of {}", decimal_gb(p.needed_bytes - q.device.memory_bytes),
                             decimal_gb(q.device.memory_bytes)));
    if (p.kv_budget_bytes <= 0) {
      row("KV budget", bytes_text(p.kv_budget_bytes), "memory - reserve - weights: the weights alone do not fit");
    } else {
      row("KV budget", bytes_text(p.kv_budget_bytes), "memory - reserve - weights");
      row("most users", fmt::format("{} at {} tokens", grouped(p.max_users), grouped(q.context_tokens)),
          fmt::format("KV budget / {} per user, rounded down", binary(p.kv_bytes_per_user)));
      row("longest ctx", fmt::format("{} tokens for {} user(s)", grouped(p.max_context_tokens), grouped(q.num_users)),
          fmt::format("KV budget / ({} x {}), rounded down to whole blocks", grouped(q.num_users),
                      binary(p.kv_bytes_per_token)));
    }
    if (q.device.bandwidth_bytes_per_s > 0) {
      row("decode bound",
          fmt::format("{} tokens/s per user, {} tokens/s in all", tokens_per_s_text(p.decode_tokens_per_s_per_user),
                      tokens_per_s_text(p.decode_tokens_per_s_total)),
          fmt::format("{} / {} read per step (every weight once + every user's KV at full context)",
                      rate_text(q.device.bandwidth_bytes_per_s), decimal_gb(p.bytes_per_step)));
    }
  }
  if (m.max_context_tokens > 0 && q.context_tokens > m.max_context_tokens)
    fmt::print("\nnote: {} tokens is past {}'s trained context of {}\n", grouped(q.context_tokens), m.name,
               grouped(m.max_context_tokens));
  if (m.num_experts > 0 && have_device && q.device.bandwidth_bytes_per_s > 0)
    fmt::print("\nnote: {} is a mixture of experts: with few users a step reads only the routed experts, so\n"
               "      the decode bound above (all weights every step) is pessimistic for small batches\n",
               m.name);
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
                  "Weight format: f16, bf16, fp8, q8_0, q4_k, q4_0, ... (default f16; a file's own size)");
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
