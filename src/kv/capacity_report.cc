#include "kv/capacity_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace folio {
namespace {

std::string trimmed(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// "68,719,476,736 B = 64 GiB = 68.72 GB"; decimal GB only from 1 GB up.
std::string bytes_text(std::int64_t bytes) {
  std::string s = grouped(bytes) + " B";
  if (std::abs(bytes) >= 1024) s += " = " + binary_bytes(bytes);
  if (std::abs(bytes) >= 1'000'000'000) s += " = " + decimal_gb(bytes);
  return s;
}

// 40.76, 1,304
std::string tokens_per_s_text(double v) {
  return v >= 100 ? grouped(static_cast<std::int64_t>(std::llround(v))) : trimmed(v);
}

// A row of `dims` numbers: "64 dims x 2 B (f16)", "64 dims x 34/32 B (q8_0,
// whole blocks)", "(64 dims x 1 B + 2 B scale) (fp8_e4m3)".
std::string row_text(const NumberFormat& f, int dims, const char* what = "dims") {
  const std::string per_number =
      f.block_elems == 1 ? fmt::format("{} B", f.block_bytes) : fmt::format("{}/{} B", f.block_bytes, f.block_elems);
  const std::string how = f.block_elems == 1 ? f.name : f.name + ", whole blocks";
  if (f.row_scale_bytes > 0)
    return fmt::format("({} {} x {} + {} B scale) ({})", dims, what, per_number, f.row_scale_bytes, how);
  return fmt::format("{} {} x {} ({})", dims, what, per_number, how);
}

std::string kv_formula(const ModelShape& m, const NumberFormat& k, const NumberFormat& v) {
  if (m.kv_latent_dim > 0)
    return fmt::format("{} layers x {} (one latent row for K and V)", m.num_layers,
                       row_text(k, m.kv_latent_dim, "numbers"));
  if (!m.kv_layers.empty()) {
    // Layers of several shapes, some reading another's cache: each shape's
    // writing layers, in the order they first come.
    std::vector<std::pair<ModelShape::LayerKv, int>> kinds;
    for (const ModelShape::LayerKv& l : m.kv_layers) {
      auto same = [&](const auto& kind) {
        return kind.first.num_kv_heads == l.num_kv_heads && kind.first.head_dim == l.head_dim &&
               kind.first.value_head_dim == l.value_head_dim;
      };
      if (auto it = std::find_if(kinds.begin(), kinds.end(), same); it != kinds.end())
        ++it->second;
      else
        kinds.emplace_back(l, 1);
    }
    std::string terms;
    for (const auto& [kind, count] : kinds)
      terms += fmt::format("{}{} layers x {} KV heads x (K {} + V {})", terms.empty() ? "" : " + ", count,
                           kind.num_kv_heads, row_text(k, kind.head_dim), row_text(v, kind.value_head_dim));
    return fmt::format("{} (the {} of {} layers that write a cache)", terms, m.kv_layers.size(), m.num_layers);
  }
  const int vd = m.value_head_dim > 0 ? m.value_head_dim : m.head_dim;
  if (k.name != v.name || vd != m.head_dim)
    return fmt::format("{} layers x {} KV heads x (K {} + V {})", m.num_layers, m.num_kv_heads, row_text(k, m.head_dim),
                       row_text(v, vd));
  return fmt::format("2 (K, V) x {} layers x {} KV heads x {}", m.num_layers, m.num_kv_heads, row_text(k, m.head_dim));
}

}  // namespace

std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

// Binary units; an exact count of the next smaller unit wins when short
// (1,677,721,600 B is "1,600 MiB", the classic "1.6 GB" per OPT-13B request).
std::string binary_bytes(std::int64_t bytes) {
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

std::string params_text(std::int64_t n) {
  return n >= 1'000'000'000 ? trimmed(static_cast<double>(n) / 1e9) + " B"
                            : trimmed(static_cast<double>(n) / 1e6) + " M";
}

std::string rate_text(double bytes_per_s) {
  return bytes_per_s >= 1e12 ? trimmed(bytes_per_s / 1e12) + " TB/s" : trimmed(bytes_per_s / 1e9) + " GB/s";
}

CapacityReport capacity_report(const CapacityQuery& q, const CapacityPlan& p,
                               const std::optional<NumberFormat>& weights, bool have_device) {
  const ModelShape& m = q.model;
  const NumberFormat& k = q.kv_format;
  const NumberFormat& v = q.v_format.value_or(q.kv_format);
  CapacityReport r;
  auto row = [&r](const char* key, const char* name, std::string value, std::string how) {
    r.rows.push_back({key, name, std::move(value), std::move(how)});
  };
  row("weights", "weights", bytes_text(p.weight_bytes),
      weights ? fmt::format("{} params x {} bits ({})", params_text(m.num_params), trimmed(weights->bits_per_number()),
                            weights->name)
              : fmt::format("{} params as stored in the file", params_text(m.num_params)));
  row("kv_per_token", "KV per token", bytes_text(p.kv_bytes_per_token), kv_formula(m, k, v));
  row("kv_per_user", "KV per user", bytes_text(p.kv_bytes_per_user),
      fmt::format("{} tokens{} x {}", grouped(p.tokens_per_user),
                  p.tokens_per_user != q.context_tokens ? " (context rounded up to whole blocks)" : "",
                  binary_bytes(p.kv_bytes_per_token)));
  row("kv_total", "KV for load", bytes_text(p.kv_bytes_total),
      fmt::format("{} user(s) x {}", grouped(q.num_users), binary_bytes(p.kv_bytes_per_user)));
  if (have_device) {
    const std::int64_t memory = q.device.memory_bytes;
    row("needed", "needed", bytes_text(p.needed_bytes), "weights + KV for load + reserve");
    row("fits", "fits", p.fits ? "yes" : "no",
        p.fits ? fmt::format("{} spare of {}", decimal_gb(memory - p.needed_bytes), decimal_gb(memory))
               : fmt::format("{} short of {}", decimal_gb(p.needed_bytes - memory), decimal_gb(memory)));
    if (p.kv_budget_bytes <= 0) {
      row("kv_budget", "KV budget", bytes_text(p.kv_budget_bytes),
          "memory - reserve - weights: the weights alone do not fit");
    } else {
      row("kv_budget", "KV budget", bytes_text(p.kv_budget_bytes), "memory - reserve - weights");
      row("max_users", "most users", fmt::format("{} at {} tokens", grouped(p.max_users), grouped(q.context_tokens)),
          fmt::format("KV budget / {} per user, rounded down", binary_bytes(p.kv_bytes_per_user)));
      row("max_context", "longest ctx",
          fmt::format("{} tokens for {} user(s)", grouped(p.max_context_tokens), grouped(q.num_users)),
          fmt::format("KV budget / ({} x {}), rounded down to whole blocks", grouped(q.num_users),
                      binary_bytes(p.kv_bytes_per_token)));
    }
    if (q.device.bandwidth_bytes_per_s > 0)
      row("decode_bound", "decode bound",
          fmt::format("{} tokens/s per user, {} tokens/s in all", tokens_per_s_text(p.decode_tokens_per_s_per_user),
                      tokens_per_s_text(p.decode_tokens_per_s_total)),
          fmt::format("{} / {} read per step (every weight once + every user's KV at full context)",
                      rate_text(q.device.bandwidth_bytes_per_s), decimal_gb(p.bytes_per_step)));
  }
  if (m.max_context_tokens > 0 && q.context_tokens > m.max_context_tokens)
    r.notes.push_back(fmt::format("{} tokens is past {}'s trained context of {}", grouped(q.context_tokens), m.name,
                                  grouped(m.max_context_tokens)));
  if (m.num_experts > 0 && have_device && q.device.bandwidth_bytes_per_s > 0)
    r.notes.push_back(fmt::format(
        "{} is a mixture of experts: with few users a step reads only the routed experts, so\nthe decode bound "
        "above (all weights every step) is pessimistic for small batches",
        m.name));
  return r;
}

}  // namespace folio
