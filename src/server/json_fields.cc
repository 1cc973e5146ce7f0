#include "server/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "server/api_error.h"

namespace folio::server {
namespace {

const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

const char* type_name(const Json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Deepest nesting of arrays and objects, and the number of values, read
// without building anything, so that a hostile body can make the parser
// neither recurse deeply nor build millions of nodes.
struct Shape {
  int depth = 0;
  std::int64_t values = 0;
};
Shape shape_of(std::string_view text) {
  Shape s;
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      s.depth = std::max(s.depth, ++depth);
      ++s.values;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' || c == ':') {
      ++s.values;  // each separator starts one more value (a key counts as one)
    }
  }
  return s;
}

}  // namespace

Json parse_json_object(std::string_view body) {
  if (body.empty()) throw ApiError(400, "the request body is empty; send a JSON object");
  const Shape shape = shape_of(body);
  if (shape.depth > kMaxJsonDepth)
    throw ApiError(400, fmt::format("the request body nests arrays and objects deeper than {} levels", kMaxJsonDepth));
  if (shape.values > kMaxJsonValues)
    throw ApiError(400, fmt::format("the request body holds more than {} JSON values", kMaxJsonValues));
  Json json;
  try {
    json = Json::parse(body);
  } catch (const Json::exception& e) {
    // nlohmann's messages name the byte offset and what it read, including
    // "ill-formed UTF-8 byte" for strings that are not UTF-8 and "number
    // overflow" for 1e999 (an out_of_range, not a parse_error).
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!json.is_object()) throw ApiError(400, fmt::format("the request body must be a JSON object, not {}", type_name(json)));
  return json;
}

std::optional<std::int64_t> as_int64(const Json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

std::optional<std::int64_t> get_int(const Json& body, const char* name, std::int64_t min, std::int64_t max) {
  const Json* v = field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) bad_request(name, fmt::format("{} must be an integer, got {}", name, type_name(*v)));
  const std::optional<std::int64_t> x = as_int64(*v);
  if (!x || *x < min || *x > max)
    bad_request(name, fmt::format("{} = {} is out of range: it must be in [{}, {}]", name, v->dump(), min, max));
  return x;
}

std::optional<double> get_number(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) bad_request(name, fmt::format("{} must be a number, got {}", name, type_name(*v)));
  return v->get<double>();
}

std::optional<bool> get_bool(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) bad_request(name, fmt::format("{} must be true or false, got {}", name, type_name(*v)));
  return v->get<bool>();
}

std::optional<std::string> get_string(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) bad_request(name, fmt::format("{} must be a string, got {}", name, type_name(*v)));
  return v->get<std::string>();
}

const Json* get_object(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) bad_request(name, fmt::format("{} must be an object, got {}", name, type_name(*v)));
  return v;
}

std::string describe(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  return dump_json(value);
}

}  // namespace folio::server
