// The planner's JSON (POST /api/capacity): the seed's worked examples come
// back in the words of `folio kv-calc`, the KV-heads control re-sizes the
// cache, and every wrong field is a 400 that names it, never a 500 or a
// product that overflows.
#include "server/web/capacity_api.h"

#include <gtest/gtest.h>

#include <string>

#include "server/api/api_error.h"

namespace folio::server {
namespace {

Json answer(const std::string& body, const PlannerChoices& choices = {}) {
  return capacity_answer(parse_json_object(body), choices);
}

// The row of a plan with this key, as the page shows it.
std::string row(const Json& a, const std::string& key) {
  for (const auto& r : a["rows"])
    if (r["key"] == key) return r["value"].get<std::string>() + " | " + r["how"].get<std::string>();
  return "(no row " + key + ")";
}

// The status and the field an error names; 200 when there is none.
std::pair<int, std::string> refusal(const std::string& body, const PlannerChoices& choices = {}) {
  try {
    answer(body, choices);
    return {200, ""};
  } catch (const ApiError& e) {
    return {e.status(), e.param()};
  }
}

TEST(CapacityApi, Opt13bWorkedExample) {
  const Json a =
      answer(R"({"model": "OPT-13B", "device": "A100", "weights": "f16", "context_tokens": 2048, "num_users": 1})");
  EXPECT_EQ(a["plan"]["kv_bytes_per_token"], 819'200);
  EXPECT_EQ(a["plan"]["kv_bytes_per_user"], 1'677'721'600);
  EXPECT_EQ(row(a, "kv_per_token"), "819,200 B = 800 KiB | 2 (K, V) x 40 layers x 40 KV heads x 128 dims x 2 B (f16)");
  EXPECT_EQ(row(a, "kv_per_user"), "1,677,721,600 B = 1,600 MiB = 1.68 GB | 2,048 tokens x 800 KiB");
  EXPECT_EQ(a["model"]["kv_head_choices"].size(), 8u);  // 1, 2, 4, 5, 8, 10, 20, 40
}

TEST(CapacityApi, Llama2_7bWorkedExample) {
  const Json a =
      answer(R"({"model": "llama 2 7b", "device": "H100", "context_tokens": 4096, "num_users": 32})");
  EXPECT_EQ(a["model"]["name"], "Llama-2-7B");
  EXPECT_EQ(row(a, "kv_per_token"), "524,288 B = 512 KiB | 2 (K, V) x 32 layers x 32 KV heads x 128 dims x 2 B (f16)");
  EXPECT_EQ(row(a, "kv_total"), "68,719,476,736 B = 64 GiB = 68.72 GB | 32 user(s) x 2 GiB");
  EXPECT_EQ(a["plan"]["fits"], false);
  EXPECT_EQ(a["plan"]["max_users"], 27);
  // The curve runs past the most users that fit and holds the chosen count.
  bool has_32 = false, has_27 = false;
  for (const auto& p : a["by_users"]) {
    has_32 |= p["num_users"] == 32;
    has_27 |= p["num_users"] == 27;
    EXPECT_EQ(p["fits"], p["num_users"].get<int>() <= 27) << p.dump();
  }
  EXPECT_TRUE(has_32 && has_27);
}

// MHA -> GQA -> MQA: the KV cache shrinks by the ratio of heads.
TEST(CapacityApi, KvHeadsControlResizesTheCache) {
  const Json mqa = answer(R"({"model": "Llama-2-7B", "device": "H100", "num_kv_heads": 1})");
  EXPECT_EQ(mqa["plan"]["kv_bytes_per_token"], 524'288 / 32);
  EXPECT_EQ(mqa["model"]["num_kv_heads"], 1);
  EXPECT_EQ(mqa["model"]["default_num_kv_heads"], 32);
  const Json gqa = answer(R"({"model": "Llama-2-7B", "device": "H100", "num_kv_heads": 8})");
  EXPECT_EQ(gqa["plan"]["kv_bytes_per_token"], 524'288 / 4);
  EXPECT_EQ(refusal(R"({"model": "Llama-2-7B", "device": "H100", "num_kv_heads": 3})"),
            std::make_pair(400, std::string("num_kv_heads")));
  EXPECT_EQ(refusal(R"({"model": "DeepSeek-V3", "device": "H200", "num_kv_heads": 1})"),
            std::make_pair(400, std::string("num_kv_heads")));  // a latent row has no heads
}

TEST(CapacityApi, LoadedModelAndThisMachine) {
  PlannerChoices c;
  ModelShape m;
  m.name = "tiny";
  m.num_params = 1000;
  m.num_layers = 2;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 8;
  c.loaded_model = m;
  c.loaded_weight_bytes = 1'234'567;
  c.this_machine = DeviceSpec{"this machine", 16'000'000'000, 20e9};
  const Json a = answer(R"({"model": "loaded", "device": "this-machine", "context_tokens": 16})", c);
  EXPECT_EQ(a["plan"]["weight_bytes"], 1'234'567);  // as stored, by default
  EXPECT_EQ(a["weights"], "stored");
  EXPECT_EQ(a["plan"]["kv_bytes_per_token"], 2 * 2 * 2 * 8 * 2);
  EXPECT_EQ(a["device"]["bandwidth_bytes_per_s"], 20e9);
  const Json menus = capacity_menus(c);
  EXPECT_EQ(menus["models"][0]["id"], "loaded");
  EXPECT_EQ(menus["defaults"]["model"], "loaded");
  EXPECT_EQ(menus["devices"].back()["id"], "this-machine");
  // Without them, asking for either is a clear refusal.
  EXPECT_EQ(refusal(R"({"model": "loaded", "device": "H100"})").first, 503);
  EXPECT_EQ(refusal(R"({"model": "OPT-13B", "device": "this-machine"})"), std::make_pair(400, std::string("device")));
  EXPECT_EQ(refusal(R"({"model": "OPT-13B", "device": "H100", "weights": "stored"})"),
            std::make_pair(400, std::string("weights")));
}

TEST(CapacityApi, CustomDevice) {
  const Json a = answer(
      R"({"model": "Llama-3-8B", "device": "custom", "memory_bytes": 24e9, "bandwidth_bytes_per_s": 1e12, "weights": "q4_k"})");
  EXPECT_EQ(a["device"]["memory_bytes"], 24'000'000'000);
  EXPECT_GT(a["plan"]["decode_tokens_per_s_per_user"].get<double>(), 0);
  EXPECT_EQ(refusal(R"({"model": "Llama-3-8B", "device": "custom"})"),
            std::make_pair(400, std::string("memory_bytes")));
  EXPECT_EQ(refusal(R"({"model": "Llama-3-8B", "device": "custom", "memory_bytes": 1e300})"),
            std::make_pair(400, std::string("memory_bytes")));
  EXPECT_EQ(refusal(R"({"model": "Llama-3-8B", "device": "custom", "memory_bytes": 8e9, "bandwidth_bytes_per_s": -1})"),
            std::make_pair(400, std::string("bandwidth_bytes_per_s")));
}

// Every field, wrong in every way a client can get it wrong.
TEST(CapacityApi, WrongFieldsAre400NamingThem) {
  const std::string base = R"("model": "Llama-2-7B", "device": "H100")";
  const std::pair<const char*, const char*> cases[] = {
      {R"({"device": "H100"})", "model"},
      {R"({"model": 7, "device": "H100"})", "model"},
      {R"({"model": "GPT-9", "device": "H100"})", "model"},
      {R"({"model": "Llama-2-7B"})", "device"},
      {R"({"model": "Llama-2-7B", "device": "TPU"})", "device"},
      {R"({"model": "Llama-2-7B", "device": ["H100"]})", "device"},
      {nullptr, R"("kv": "int3")"},
      {nullptr, R"("kv": "f16:int3")"},
      {nullptr, R"("weights": "q1_z")"},
      {nullptr, R"("context_tokens": 0)"},
      {nullptr, R"("context_tokens": 1e30)"},
      {nullptr, R"("context_tokens": 4096.5)"},
      {nullptr, R"("context_tokens": "4096")"},
      {nullptr, R"("num_users": -1)"},
      {nullptr, R"("num_users": 18446744073709551615)"},
      {nullptr, R"("num_users": 65537)"},
      {nullptr, R"("block_size": 0)"},
      {nullptr, R"("reserve_fraction": 1.5)"},
      {nullptr, R"("reserve_fraction": "half")"},
      {nullptr, R"("num_kv_heads": 0)"},
  };
  for (const auto& [whole, extra] : cases) {
    const std::string body = whole ? whole : "{" + base + ", " + extra + "}";
    const auto [status, param] = refusal(body);
    EXPECT_EQ(status, 400) << body;
    if (whole)
      EXPECT_EQ(param, extra) << body;
    else
      EXPECT_EQ(std::string(extra).find("\"" + param + "\""), 0u) << body << " named " << param;
  }
}

// The largest query allowed, on the preset with the most KV per token, still
// computes: the limits keep every product below 2^60.
TEST(CapacityApi, LimitsDoNotOverflow) {
  const Json a = answer(R"({"model": "Llama-2-13B", "device": "custom", "memory_bytes": 1e16,
      "bandwidth_bytes_per_s": 1e15, "weights": "f32", "kv": "f32", "num_users": 65536, "context_tokens": 4194304})");
  EXPECT_GT(a["plan"]["kv_bytes_total"].get<std::int64_t>(), 0);
  EXPECT_EQ(a["plan"]["fits"], false);
}

}  // namespace
}  // namespace folio::server
