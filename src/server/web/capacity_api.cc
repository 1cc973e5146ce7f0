#include "server/web/capacity_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/capacity_report.h"
#include "server/api/api_error.h"
#include "server/http/http_message.h"

namespace folio::server {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

Json model_json(const std::string& id, const ModelShape& m) {
  // The KV head counts the model could have been built with: MQA (1) to MHA
  // (every query head its own); none for a latent row (MLA) or unknown heads.
  const std::vector<int> kv_heads = m.kv_latent_dim > 0 ? std::vector<int>{} : divisors(m.num_heads);
  return {{"id", id},
          {"name", m.name},
          {"num_params", m.num_params},
          {"num_layers", m.num_layers},
          {"num_heads", m.num_heads},
          {"num_kv_heads", m.num_kv_heads},
          {"head_dim", m.head_dim},
          {"kv_latent_dim", m.kv_latent_dim},
          {"num_experts", m.num_experts},
          {"max_context_tokens", m.max_context_tokens},
          {"kv_head_choices", kv_heads}};
}

Json device_json(const std::string& id, const DeviceSpec& d) {
  return {{"id", id},
          {"name", d.name},
          {"memory_bytes", d.memory_bytes},
          {"bandwidth_bytes_per_s", d.bandwidth_bytes_per_s}};
}

struct ChosenModel {
  std::string id;
  ModelShape shape;
  std::optional<std::int64_t> stored_weight_bytes;  // the loaded model's file
};

ChosenModel choose_model(const Json& body, const PlannerChoices& choices) {
  const std::optional<std::string> id = get_string(body, "model");
  if (!id)
    bad_request("model", "name a model: a preset such as Llama-2-7B, or \"loaded\" (GET /api/capacity lists them)");
  if (*id == kLoadedModelId) {
    if (!choices.loaded_model) throw ApiError(503, "the model is still loading; pick a preset or try again shortly");
    return {*id, *choices.loaded_model, choices.loaded_weight_bytes};
  }
  if (auto preset = find_model_preset(*id)) return {preset->name, *preset, std::nullopt};
  bad_request("model",
              fmt::format("no model preset is called \"{}\"; GET /api/capacity lists them", printable(*id, 64)));
}

std::pair<std::string, DeviceSpec> choose_device(const Json& body, const PlannerChoices& choices) {
  const std::optional<std::string> id = get_string(body, "device");
  if (!id) bad_request("device", "name a device: H100, H200, A100, RTX-4090, \"this-machine\" or \"custom\"");
  if (*id == kThisMachineId) {
    if (!choices.this_machine) bad_request("device", "this server does not offer its own machine as a device");
    return {*id, *choices.this_machine};
  }
  if (*id == kCustomDeviceId) {
    DeviceSpec d{"custom", 0, 0};
    const auto memory = get_number(body, "memory_bytes");
    if (!memory || !(*memory >= 1e6 && *memory <= 1e16))
      bad_request("memory_bytes", "a custom device needs memory_bytes, from 1e6 to 1e16");
    d.memory_bytes = static_cast<std::int64_t>(*memory);
    const auto bandwidth = get_number(body, "bandwidth_bytes_per_s");
    if (bandwidth && !(*bandwidth >= 0 && *bandwidth <= 1e15))
      bad_request("bandwidth_bytes_per_s", "bandwidth_bytes_per_s must be from 0 to 1e15 (0: no decode bound)");
    d.bandwidth_bytes_per_s = bandwidth.value_or(0);
    return {*id, d};
  }
  if (auto preset = find_device_preset(*id)) return {preset->name, *preset};
  bad_request("device", fmt::format("no device is called \"{}\"; GET /api/capacity lists them", printable(*id, 64)));
}

Json plan_json(const CapacityPlan& p) {
  return {{"weight_bytes", p.weight_bytes},
          {"kv_bytes_per_token", p.kv_bytes_per_token},
          {"tokens_per_user", p.tokens_per_user},
          {"kv_bytes_per_user", p.kv_bytes_per_user},
          {"kv_bytes_total", p.kv_bytes_total},
          {"reserve_bytes", p.reserve_bytes},
          {"kv_budget_bytes", p.kv_budget_bytes},
          {"needed_bytes", p.needed_bytes},
          {"fits", p.fits},
          {"max_users", p.max_users},
          {"max_context_tokens", p.max_context_tokens},
          {"bytes_per_step", p.bytes_per_step},
          {"decode_tokens_per_s_per_user", p.decode_tokens_per_s_per_user},
          {"decode_tokens_per_s_total", p.decode_tokens_per_s_total}};
}

}  // namespace

Json capacity_menus(const PlannerChoices& choices) {
  Json models = Json::array();
  if (choices.loaded_model) models.push_back(model_json(kLoadedModelId, *choices.loaded_model));
  for (const ModelShape& m : model_presets()) models.push_back(model_json(m.name, m));
  Json devices = Json::array();
  for (const DeviceSpec& d : device_presets()) devices.push_back(device_json(d.name, d));
  if (choices.this_machine) devices.push_back(device_json(kThisMachineId, *choices.this_machine));
  return {{"models", std::move(models)},
          {"devices", std::move(devices)},
          {"weight_formats", weight_number_format_names()},
          {"kv_formats", kv_number_format_names()},
          {"limits", {{"num_users", kMaxPlannerUsers}, {"context_tokens", kMaxPlannerContext}}},
          {"defaults",
           {{"model", choices.loaded_model ? kLoadedModelId : "Llama-2-7B"},
            {"device", "H100"},
            {"weights", "f16"},
            {"kv", "f16"},
            {"context_tokens", 4096},
            {"num_users", 32},
            {"block_size", kDefaultBlockSize},
            {"reserve_fraction", 0.10}}}};
}

Json capacity_answer(const Json& body, const PlannerChoices& choices) {
  ChosenModel model = choose_model(body, choices);
  auto [device_id, device] = choose_device(body, choices);
  ModelShape& shape = model.shape;

  const int default_kv_heads = shape.num_kv_heads;
  if (auto heads = get_int(body, "num_kv_heads", 1, 1 << 16)) {
    if (shape.kv_latent_dim > 0)
      bad_request("num_kv_heads", fmt::format("{} caches one latent row per layer (multi-head latent attention); it "
                                              "has no KV heads to change",
                                              shape.name));
    if (shape.num_heads > 0 && shape.num_heads % *heads != 0)
      bad_request("num_kv_heads", fmt::format("{} has {} query heads; KV heads must divide them: {}", shape.name,
                                              shape.num_heads, fmt::join(divisors(shape.num_heads), ", ")));
    shape.num_kv_heads = static_cast<int>(*heads);
  }

  const std::string kv_name = get_string(body, "kv").value_or("f16");
  const auto kv = kv_number_formats(kv_name);
  if (!kv)
    bad_request("kv", fmt::format("unknown KV cache type \"{}\"; use one of {}, or K:V such as q8_0:f16",
                                  printable(kv_name, 64), fmt::join(kv_number_format_names(), ", ")));

  CapacityQuery q;
  q.model = shape;
  q.kv_format = kv->k;
  if (kv->v.name != kv->k.name) q.v_format = kv->v;
  q.device = device;
  q.context_tokens = get_int(body, "context_tokens", 1, kMaxPlannerContext).value_or(4096);
  q.num_users = get_int(body, "num_users", 1, kMaxPlannerUsers).value_or(1);
  q.block_size = static_cast<int>(get_int(body, "block_size", 1, 1024).value_or(kDefaultBlockSize));
  if (auto reserve = get_number(body, "reserve_fraction")) {
    if (!(*reserve >= 0 && *reserve <= 0.9)) bad_request("reserve_fraction", "reserve_fraction must be from 0 to 0.9");
    q.reserve_fraction = *reserve;
  }

  const std::string weights_name = get_string(body, "weights").value_or(model.stored_weight_bytes ? "stored" : "f16");
  std::optional<NumberFormat> weights;
  if (weights_name == "stored") {
    if (!model.stored_weight_bytes)
      bad_request("weights",
                  fmt::format("{} is a preset, not a file: give a weight format such as f16 or q4_k", shape.name));
    q.weight_bytes = *model.stored_weight_bytes;
  } else {
    weights = weight_number_format(weights_name);
    if (!weights)
      bad_request("weights", fmt::format("unknown weight format \"{}\"; use \"stored\" (the loaded file) or {}",
                                         printable(weights_name, 64), fmt::join(weight_number_format_names(), ", ")));
    q.weight_bytes = weight_bytes(shape, *weights);
  }

  CapacityPlan plan;
  Json curve = Json::array();
  try {
    plan = plan_capacity(q);
    // The decode bound as users are added: powers of two to past the most
    // that fit, and the most that fit and the chosen count themselves.
    std::vector<std::int64_t> users;
    const std::int64_t upper = std::clamp<std::int64_t>(2 * std::max(plan.max_users, q.num_users), 8, kMaxPlannerUsers);
    for (std::int64_t u = 1; u <= upper; u *= 2) users.push_back(u);
    if (plan.max_users > 0) users.push_back(plan.max_users);
    users.push_back(q.num_users);
    std::sort(users.begin(), users.end());
    users.erase(std::unique(users.begin(), users.end()), users.end());
    for (std::int64_t u : users) {
      CapacityQuery at = q;
      at.num_users = u;
      const CapacityPlan p = plan_capacity(at);
      curve.push_back({{"num_users", u},
                       {"fits", p.fits},
                       {"decode_tokens_per_s_per_user", p.decode_tokens_per_s_per_user},
                       {"decode_tokens_per_s_total", p.decode_tokens_per_s_total}});
    }
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  const CapacityReport report = capacity_report(q, plan, weights, /*have_device=*/true);
  Json rows = Json::array();
  for (const CapacityRow& r : report.rows)
    rows.push_back({{"key", r.key}, {"name", r.name}, {"value", r.value}, {"how", r.how}});

  Json m = model_json(model.id, shape);
  m["default_num_kv_heads"] = default_kv_heads;
  return {{"model", std::move(m)},
          {"device", device_json(device_id, device)},
          {"weights", weights ? weights->name : "stored"},
          {"kv", kv->name},
          {"context_tokens", q.context_tokens},
          {"num_users", q.num_users},
          {"block_size", q.block_size},
          {"reserve_fraction", q.reserve_fraction},
          {"plan", plan_json(plan)},
          {"rows", std::move(rows)},
          {"notes", report.notes},
          {"by_users", std::move(curve)}};
}

}  // namespace folio::server
