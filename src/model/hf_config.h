// HfConfig: a Hugging Face config.json, read with typed lookups whose errors
// name the file and the key. Keys may be nested ("rope_parameters.rope_theta").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace folio {

// Reads and parses a JSON file that must hold an object; throws Error naming
// the file when it is missing or malformed.
nlohmann::json read_json_object(const std::string& path);

class HfConfig {
 public:
  // Reads and parses `path`; throws Error when it is missing or not a JSON object.
  static HfConfig open(const std::string& path);
  // A config from JSON already parsed; `source` names it in errors.
  HfConfig(nlohmann::json json, std::string source);

  const std::string& source() const { return source_; }
  const nlohmann::json& json() const { return json_; }

  // The value at `key` (dots separate nested objects), or null when absent or null.
  const nlohmann::json* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Typed lookups with a fallback for absent (or null) keys; a present key of
  // the wrong type is an error.
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key, std::string_view fallback) const;
  // A positive count that must be present (at most 2^32).
  std::int64_t need_count(std::string_view key) const;

  // architectures[0]: the model class, "LlamaForCausalLM", ...
  std::string architecture() const;

  // A vision-language checkpoint's config keeps its language model's keys in
  // text_config: this config with them raised to the top (over the top
  // level's, nulls left out), as the language model reads them. A config
  // without text_config comes back unchanged.
  HfConfig with_text_config_raised() const;

 private:
  nlohmann::json json_;
  std::string source_;
};

}  // namespace folio
