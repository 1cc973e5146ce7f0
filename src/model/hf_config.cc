#include "model/hf_config.h"

#include <filesystem>

#include "core/error.h"
#include "core/read_file.h"

namespace folio {

nlohmann::json read_json_object(const std::string& path) {
  nlohmann::json json = nlohmann::json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) fail("{} is not well-formed JSON; fetch or write it again", path);
  if (!json.is_object()) fail("{} is not a JSON object", path);
  return json;
}

HfConfig HfConfig::open(const std::string& path) {
  if (!std::filesystem::exists(path))
    fail("cannot read {}; a Hugging Face model directory needs its config.json", path);
  return HfConfig(read_json_object(path), path);
}

HfConfig::HfConfig(nlohmann::json json, std::string source) : json_(std::move(json)), source_(std::move(source)) {}

const nlohmann::json* HfConfig::find(std::string_view key) const {
  const nlohmann::json* node = &json_;
  while (true) {
    const std::size_t dot = key.find('.');
    const std::string part(key.substr(0, dot));
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end() || it->is_null()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    key.remove_prefix(dot + 1);
  }
}

std::int64_t HfConfig::get_int(std::string_view key, std::int64_t fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) fail("{}: {} is {}; expected an integer", source_, key, v->dump());
  return v->get<std::int64_t>();
}

double HfConfig::get_float(std::string_view key, double fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) fail("{}: {} is {}; expected a number", source_, key, v->dump());
  return v->get<double>();
}

bool HfConfig::get_bool(std::string_view key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail("{}: {} is {}; expected true or false", source_, key, v->dump());
  return v->get<bool>();
}

std::string HfConfig::get_string(std::string_view key, std::string_view fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::string(fallback);
  if (!v->is_string()) fail("{}: {} is {}; expected a string", source_, key, v->dump());
  return v->get<std::string>();
}

std::int64_t HfConfig::need_count(std::string_view key) const {
  if (!has(key)) fail("{} has no {}", source_, key);
  const std::int64_t v = get_int(key, 0);
  if (v <= 0 || v > (std::int64_t{1} << 32)) fail("{}: {} = {} is out of range", source_, key, v);
  return v;
}

std::string HfConfig::architecture() const {
  const nlohmann::json* a = find("architectures");
  if (a == nullptr || !a->is_array() || a->empty() || !(*a)[0].is_string())
    fail("{} has no \"architectures\" list naming the model class (LlamaForCausalLM, ...)", source_);
  if (a->size() > 1) fail("{} names {} model classes; folio reads checkpoints of one", source_, a->size());
  return (*a)[0].get<std::string>();
}

HfConfig HfConfig::with_text_config_raised() const {
  const nlohmann::json* text = find("text_config");
  if (text == nullptr || !text->is_object()) return *this;
  nlohmann::json merged = json_;
  for (const auto& [key, value] : text->items())
    if (!value.is_null()) merged[key] = value;
  return HfConfig(std::move(merged), source_ + " (text_config)");
}

}  // namespace folio
