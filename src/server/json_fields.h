// Typed reads of request fields: each returns nullopt when the field is absent
// or null (OpenAI treats null as "not given") and throws ApiError 400 naming
// the field when its type or range is wrong. Unknown fields are never read,
// so they are ignored, as OpenAI ignores them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace folio::server {

using Json = nlohmann::ordered_json;

// The body of a POST as a JSON object; 400 when it is not JSON, is nested
// deeper than kMaxJsonDepth, or is not an object.
Json parse_json_object(std::string_view body);
inline constexpr int kMaxJsonDepth = 64;

std::optional<std::int64_t> get_int(const Json& body, const char* name, std::int64_t min, std::int64_t max);
std::optional<double> get_number(const Json& body, const char* name);
std::optional<bool> get_bool(const Json& body, const char* name);
std::optional<std::string> get_string(const Json& body, const char* name);
// An object field (stream_options, logit_bias); nullptr when absent or null.
const Json* get_object(const Json& body, const char* name);

// A field's value for messages: strings as they are, others as JSON.
std::string describe(const Json& value);

}  // namespace folio::server
