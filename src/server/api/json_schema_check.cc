#include "server/api/json_schema_check.h"

#include <cmath>
#include <string>

#include "core/utf8.h"

namespace folio::server {
namespace {

// A schema may refer to itself ($ref: "#"); a bound on the depth of
// references followed keeps such a schema from looping.
constexpr int kMaxDepth = 64;

bool is_integer(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

bool has_type(const Json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "integer") return is_integer(v);
  if (type == "number") return v.is_number();
  return true;  // a type this check does not know
}

// JSON equality as JSON Schema means it: 1 and 1.0 are the same number.
bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
      auto other = b.find(key);
      if (other == b.end() || !json_equal(value, *other)) return false;
    }
    return true;
  }
  return a == b;
}

std::size_t num_code_points(const std::string& s) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < s.size();) {
    utf8::decode_lenient(s, pos);
    ++n;
  }
  return n;
}

// The schema a local reference ("#", "#/$defs/x", "#/definitions/x", any
// JSON pointer into the root) names; nullptr when it names nothing.
const Json* resolve(const Json& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#') return nullptr;
  if (ref.size() == 1) return &root;
  try {
    const Json::json_pointer pointer(ref.substr(1));
    return root.contains(pointer) ? &root.at(pointer) : nullptr;
  } catch (const std::exception&) {
    return nullptr;
  }
}

class Checker {
 public:
  explicit Checker(const Json& root) : root_(root) {}

  bool fits(const Json& v, const Json& s, int depth) const {
    if (depth > kMaxDepth) return false;
    if (s.is_boolean()) return s.get<bool>();
    if (!s.is_object()) return true;
    if (auto ref = s.find("$ref"); ref != s.end() && ref->is_string()) {
      const Json* target = resolve(root_, ref->get<std::string>());
      if (target == nullptr || !fits(v, *target, depth + 1)) return false;
    }
    if (auto type = s.find("type"); type != s.end()) {
      bool any = false;
      if (type->is_string()) any = has_type(v, type->get<std::string>());
      if (type->is_array())
        for (const Json& t : *type) any = any || (t.is_string() && has_type(v, t.get<std::string>()));
      if (!any) return false;
    }
    if (auto e = s.find("enum"); e != s.end() && e->is_array()) {
      bool any = false;
      for (const Json& option : *e) any = any || json_equal(v, option);
      if (!any) return false;
    }
    if (auto c = s.find("const"); c != s.end() && !json_equal(v, *c)) return false;
    if (v.is_number() && !fits_number(v.get<double>(), s)) return false;
    if (v.is_string() && !fits_string(v.get_ref<const std::string&>(), s)) return false;
    if (v.is_array() && !fits_array(v, s, depth)) return false;
    if (v.is_object() && !fits_object(v, s, depth)) return false;
    return fits_combinations(v, s, depth);
  }

 private:
  static bool number_of(const Json& s, const char* key, double& out) {
    auto it = s.find(key);
    if (it == s.end() || !it->is_number()) return false;
    out = it->get<double>();
    return true;
  }

  static bool fits_number(double x, const Json& s) {
    double bound = 0;
    if (number_of(s, "minimum", bound) && x < bound) return false;
    if (number_of(s, "maximum", bound) && x > bound) return false;
    if (number_of(s, "exclusiveMinimum", bound) && x <= bound) return false;
    if (number_of(s, "exclusiveMaximum", bound) && x >= bound) return false;
    if (number_of(s, "multipleOf", bound) && bound > 0) {
      const double q = x / bound;
      if (std::abs(q - std::round(q)) > 1e-9 * std::max(1.0, std::abs(q))) return false;
    }
    return true;
  }

  static bool fits_string(const std::string& str, const Json& s) {
    double bound = 0;
    const bool has_min = number_of(s, "minLength", bound);
    const double min_length = bound;
    const bool has_max = number_of(s, "maxLength", bound);
    if (!has_min && !has_max) return true;
    const double n = static_cast<double>(num_code_points(str));
    return !(has_min && n < min_length) && !(has_max && n > bound);
  }

  bool fits_array(const Json& v, const Json& s, int depth) const {
    double bound = 0;
    const double n = static_cast<double>(v.size());
    if (number_of(s, "minItems", bound) && n < bound) return false;
    if (number_of(s, "maxItems", bound) && n > bound) return false;
    std::size_t first_rest = 0;
    if (auto prefix = s.find("prefixItems"); prefix != s.end() && prefix->is_array()) {
      for (std::size_t i = 0; i < std::min(prefix->size(), v.size()); ++i)
        if (!fits(v[i], (*prefix)[i], depth + 1)) return false;
      first_rest = prefix->size();
    }
    if (auto items = s.find("items"); items != s.end()) {
      if (items->is_array()) {  // the older tuple form
        for (std::size_t i = 0; i < std::min(items->size(), v.size()); ++i)
          if (!fits(v[i], (*items)[i], depth + 1)) return false;
      } else {
        for (std::size_t i = first_rest; i < v.size(); ++i)
          if (!fits(v[i], *items, depth + 1)) return false;
      }
    }
    if (auto unique = s.find("uniqueItems"); unique != s.end() && unique->is_boolean() && unique->get<bool>())
      for (std::size_t i = 0; i < v.size(); ++i)
        for (std::size_t j = i + 1; j < v.size(); ++j)
          if (json_equal(v[i], v[j])) return false;
    return true;
  }

  bool fits_object(const Json& v, const Json& s, int depth) const {
    double bound = 0;
    const double n = static_cast<double>(v.size());
    if (number_of(s, "minProperties", bound) && n < bound) return false;
    if (number_of(s, "maxProperties", bound) && n > bound) return false;
    if (auto required = s.find("required"); required != s.end() && required->is_array())
      for (const Json& key : *required)
        if (key.is_string() && !v.contains(key.get<std::string>())) return false;
    const Json* properties = nullptr;
    if (auto p = s.find("properties"); p != s.end() && p->is_object()) properties = &*p;
    const Json* additional = nullptr;
    if (auto a = s.find("additionalProperties"); a != s.end()) additional = &*a;
    for (const auto& [key, value] : v.items()) {
      if (properties != nullptr) {
        if (auto p = properties->find(key); p != properties->end()) {
          if (!fits(value, *p, depth + 1)) return false;
          continue;
        }
      }
      // patternProperties would need a regex; such keys are let through.
      if (s.contains("patternProperties")) continue;
      if (additional != nullptr && !fits(value, *additional, depth + 1)) return false;
    }
    return true;
  }

  bool fits_combinations(const Json& v, const Json& s, int depth) const {
    if (auto all = s.find("allOf"); all != s.end() && all->is_array())
      for (const Json& sub : *all)
        if (!fits(v, sub, depth + 1)) return false;
    if (auto any = s.find("anyOf"); any != s.end() && any->is_array()) {
      bool ok = false;
      for (const Json& sub : *any) ok = ok || fits(v, sub, depth + 1);
      if (!ok) return false;
    }
    if (auto one = s.find("oneOf"); one != s.end() && one->is_array()) {
      int matches = 0;
      for (const Json& sub : *one) matches += fits(v, sub, depth + 1) ? 1 : 0;
      if (matches != 1) return false;
    }
    if (auto no = s.find("not"); no != s.end() && fits(v, *no, depth + 1)) return false;
    return true;
  }

  const Json& root_;
};

}  // namespace

bool fits_schema(const Json& value, const Json& schema) { return Checker(schema).fits(value, schema, 0); }

}  // namespace folio::server
