#include "server/api/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_set>
#include <vector>

#include "server/api/api_error.h"
#include "server/http/http_message.h"

namespace folio::server {
namespace {

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

// Builds the tree from nlohmann's SAX events in linear time: an ordered_json
// object checks every key it inserts against all the others, which a hostile
// object of many keys would make quadratic. Keys are checked against a set per
// open object instead, and a duplicate stops the parse.
class OrderedBuilder : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& v) override { return value(std::move(v)); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (!stack_.back().keys.insert(k).second) {
      duplicate_ = k;
      return false;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // nlohmann's messages name the byte offset and what it read, including
    // "ill-formed UTF-8 byte" for strings that are not UTF-8 and "number
    // overflow" for 1e999.
    error_ = e.what();
    return false;
  }

  // Why the parse stopped: a syntax error, or a repeated key.
  const std::string& error() const { return error_; }
  const std::optional<std::string>& duplicate() const { return duplicate_; }
  Json& result() { return result_; }

 private:
  struct Open {
    Json value;
    std::unordered_set<std::string> keys;
    std::string key;  // what it sits under in its parent object
  };

  // A finished value: into the value being built, or the result.
  void place(Json v, std::string key) {
    if (stack_.empty()) {
      result_ = std::move(v);
      return;
    }
    Json& parent = stack_.back().value;
    if (parent.is_array()) {
      parent.push_back(std::move(v));
    } else {
      // The key set proved it new: straight onto the object's vector.
      parent.get_ref<Json::object_t&>().emplace_back(std::move(key), std::move(v));
    }
  }

  bool value(Json v) {
    place(std::move(v), key_);
    return true;
  }

  bool open(Json v) {
    stack_.push_back({std::move(v), {}, key_});
    return true;
  }

  bool close() {
    Open done = std::move(stack_.back());
    stack_.pop_back();
    place(std::move(done.value), std::move(done.key));
    return true;
  }

  std::vector<Open> stack_;
  Json result_;
  std::string key_;
  std::string error_;
  std::optional<std::string> duplicate_;
};

}  // namespace

std::optional<Json> parse_json(std::string_view text) {
  if (shape_of(text).depth > kMaxJsonDepth) return std::nullopt;
  OrderedBuilder builder;
  if (!Json::sax_parse(text, &builder)) return std::nullopt;
  return std::move(builder.result());
}

Json parse_json_object(std::string_view body) {
  if (body.empty()) throw ApiError(400, "the request body is empty; send a JSON object");
  const Shape shape = shape_of(body);
  if (shape.depth > kMaxJsonDepth)
    throw ApiError(400, fmt::format("the request body nests arrays and objects deeper than {} levels", kMaxJsonDepth));
  if (shape.values > kMaxJsonValues)
    throw ApiError(400, fmt::format("the request body holds more than {} JSON values", kMaxJsonValues));
  OrderedBuilder builder;
  if (!Json::sax_parse(body, &builder)) {
    if (builder.duplicate())
      throw ApiError(400, fmt::format("the request body repeats the key \"{}\" within one object; send each key once",
                                      printable(*builder.duplicate(), 64)));
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", builder.error()));
  }
  Json& json = builder.result();
  if (!json.is_object())
    throw ApiError(400, fmt::format("the request body must be a JSON object, not {}", type_name(json)));
  return std::move(json);
}

const Json* field_of(const Json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
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
  const Json* v = field_of(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) bad_request(name, fmt::format("{} must be an integer, got {}", name, type_name(*v)));
  const std::optional<std::int64_t> x = as_int64(*v);
  if (!x || *x < min || *x > max)
    bad_request(name, fmt::format("{} = {} is out of range: it must be in [{}, {}]", name, v->dump(), min, max));
  return x;
}

std::optional<double> get_number(const Json& body, const char* name) {
  const Json* v = field_of(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) bad_request(name, fmt::format("{} must be a number, got {}", name, type_name(*v)));
  return v->get<double>();
}

std::optional<bool> get_bool(const Json& body, const char* name) {
  const Json* v = field_of(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) bad_request(name, fmt::format("{} must be true or false, got {}", name, type_name(*v)));
  return v->get<bool>();
}

std::optional<std::string> get_string(const Json& body, const char* name) {
  const Json* v = field_of(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) bad_request(name, fmt::format("{} must be a string, got {}", name, type_name(*v)));
  return v->get<std::string>();
}

const Json* get_object(const Json& body, const char* name) {
  const Json* v = field_of(body, name);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) bad_request(name, fmt::format("{} must be an object, got {}", name, type_name(*v)));
  return v;
}

const Json* get_array(const Json& body, const char* name) {
  const Json* v = field_of(body, name);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) bad_request(name, fmt::format("{} must be an array, got {}", name, type_name(*v)));
  return v;
}

std::string describe(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  return dump_json(value);
}

}  // namespace folio::server
