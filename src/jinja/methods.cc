// Member access and the methods of str, list and dict, with CPython's results.
#include "jinja/methods.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "core/utf8.h"
#include "jinja/error.h"
#include "jinja/operators.h"
#include "jinja/string.h"

namespace folio::jinja {

namespace {

constexpr std::array<std::string_view, 38> kStrMethods = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find",
    "format", "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
    "isidentifier", "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join",
    "ljust", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "replace", "rfind",
    "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split"};
constexpr std::array<std::string_view, 9> kStrMethodsMore = {
    "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill",
    "maketrans"};
constexpr std::array<std::string_view, 11> kListMethods = {
    "append", "clear", "copy", "count", "extend", "index", "insert", "pop", "remove", "reverse", "sort"};
constexpr std::array<std::string_view, 2> kTupleMethods = {"count", "index"};
constexpr std::array<std::string_view, 11> kDictMethods = {
    "clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem", "setdefault", "update", "values"};
// Methods that would change a container: ImmutableSandboxedEnvironment refuses them.
constexpr std::array<std::string_view, 13> kMutating = {
    "append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort",
    "popitem", "setdefault", "update", "fromkeys", "add"};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool has_method(const Value& obj, std::string_view name) {
  if (obj.is_string()) return contains(kStrMethods, name) || contains(kStrMethodsMore, name);
  if (obj.is_sequence()) {
    if (obj.seq().kind == SeqKind::kList) return contains(kListMethods, name);
    if (obj.seq().kind == SeqKind::kTuple) return contains(kTupleMethods, name);
    return false;
  }
  if (obj.is_mapping()) return contains(kDictMethods, name);
  return false;
}

// The text Python's object_type_repr gives for a value in undefined hints.
std::string object_type(const Value& obj) {
  if (obj.is_none()) return "None";
  return obj.type_name() + " object";
}

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type(obj), name));
}

std::optional<std::string> optional_string(const Value& v, std::string_view what) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) runtime_fail(std::string(what) + " must be None or a str, not " + v.type_name());
  return v.as_string();
}

const std::string& string_arg(const Value& v, std::string_view what) {
  if (!v.is_string()) {
    if (v.is_undefined()) fail_undefined(v);
    runtime_fail(std::string(what) + " must be str, not " + v.type_name());
  }
  return v.as_string();
}

// Python's slice index rules (PySlice_AdjustIndices) for a sequence of `length`.
struct SliceRange {
  std::int64_t start, stop, step;
};

SliceRange adjust_slice(std::int64_t length, const Value& start_v, const Value& stop_v,
                        const Value& step_v) {
  auto given = [](const Value& v) { return !v.is_undefined() && !v.is_none(); };
  std::int64_t step = given(step_v) ? step_v.as_int() : 1;
  if (step == 0) runtime_fail("slice step cannot be zero");
  auto clamp = [&](const Value& v, std::int64_t fallback) {
    if (!given(v)) return fallback;
    std::int64_t i = v.as_int();
    if (i < 0) {
      i += length;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= length) {
      i = step < 0 ? length - 1 : length;
    }
    return i;
  };
  std::int64_t start = clamp(start_v, step < 0 ? length - 1 : 0);
  std::int64_t stop = clamp(stop_v, step < 0 ? -1 : length);
  return {start, stop, step};
}

template <typename Fn>
void for_each_index(const SliceRange& r, Fn fn) {
  if (r.step > 0) {
    for (std::int64_t i = r.start; i < r.stop; i += r.step) fn(i);
  } else {
    for (std::int64_t i = r.start; i > r.stop; i += r.step) fn(i);
  }
}

// Python's str.center/ljust/rjust padding.
std::string pad(const std::string& s, std::int64_t width, const std::string& fill, char how) {
  std::int64_t length = static_cast<std::int64_t>(utf8::length(s));
  if (width <= length) return s;
  std::int64_t margin = width - length;
  std::int64_t left = how == 'l' ? 0 : how == 'r' ? margin : margin / 2 + (margin & width & 1);
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (std::int64_t i = 0; i < margin - left; ++i) out += fill;
  return out;
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::sequence(std::move(items));
}

// The code-point slice [start, end) of s as a str method's start/end arguments give it.
std::string method_window(const std::string& s, const BoundArgs& a, std::size_t start_index) {
  if (!a.has(start_index) && !a.has(start_index + 1)) return s;
  std::int64_t length = static_cast<std::int64_t>(utf8::length(s));
  SliceRange r = adjust_slice(length, a.get(start_index), a.get(start_index + 1), Value());
  if (r.stop <= r.start) return "";
  return utf8::substr(s, static_cast<std::size_t>(r.start), static_cast<std::size_t>(r.stop));
}

// str.format with plain replacement fields: {}, {0}, {name}, an optional !r
// or !s conversion, and {{ }} escapes. Format specs are refused.
std::string py_format(const std::string& text, const CallArgs& args) {
  std::string out;
  std::size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      runtime_fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    std::size_t close = text.find('}', i);
    if (close == std::string::npos) runtime_fail("Single '{' encountered in format string");
    std::string field = text.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (std::size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 'r' && field[bang + 1] != 's')) {
        runtime_fail("str.format() conversions other than !r and !s are not supported");
      }
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find_first_of(":.[") != std::string::npos) {
      runtime_fail("str.format() format specs and field lookups are not supported in chat templates; use filters");
    }
    const Value* arg = nullptr;
    if (field.empty()) {
      if (used_manual) runtime_fail("cannot switch from manual field specification to automatic field numbering");
      used_auto = true;
      if (auto_index >= args.positional.size()) {
        runtime_fail("Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
      }
      arg = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      if (used_auto) runtime_fail("cannot switch from automatic field numbering to manual field specification");
      used_manual = true;
      std::size_t index = std::stoul(field);
      if (index >= args.positional.size()) {
        runtime_fail("Replacement index " + field + " out of range for positional args tuple");
      }
      arg = &args.positional[index];
    } else {
      for (const auto& [k, v] : args.keyword) {
        if (k == field) arg = &v;
      }
      if (!arg) runtime_fail("KeyError: '" + field + "'");
    }
    out += conversion == 'r' ? arg->repr() : arg->str();
  }
  return out;
}

Value call_str_method(const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.as_string();
  const std::string fn = "str." + name;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs a(fn, args, {"chars"});
    return Value::string(py_strip(s, optional_string(a.get(0), "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    BoundArgs a(fn, args, {"sep", "maxsplit"});
    std::int64_t maxsplit = a.has(1) ? py_index(a.get(1), "maxsplit") : -1;
    return string_list(py_split(s, optional_string(a.get(0), "sep"), maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    BoundArgs a(fn, args, {"keepends"});
    return string_list(py_splitlines(s, a.get_or(0, Value::boolean(false)).truthy()));
  }
  if (name == "startswith" || name == "endswith") {
    BoundArgs a(fn, args, {"prefix", "start", "end"});
    std::string window = method_window(s, a, 1);
    std::vector<std::string> candidates;
    const Value& prefix = a.get(0);
    if (prefix.is_sequence() && prefix.seq().kind == SeqKind::kTuple) {
      for (const Value& p : prefix.seq().items) candidates.push_back(string_arg(p, fn + " prefix"));
    } else {
      if (!prefix.is_string()) {
        runtime_fail(name + " first arg must be str or a tuple of str, not " + prefix.type_name());
      }
      candidates.push_back(prefix.as_string());
    }
    for (const std::string& c : candidates) {
      bool hit = name == "startswith" ? window.starts_with(c) : window.ends_with(c);
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "upper" || name == "lower" || name == "casefold" || name == "title" || name == "capitalize") {
    BoundArgs a(fn, args, {});
    if (name == "upper") return Value::string(py_upper(s));
    if (name == "title") return Value::string(py_title(s));
    if (name == "capitalize") return Value::string(py_capitalize(s));
    return Value::string(py_lower(s));
  }
  if (name == "replace") {
    BoundArgs a(fn, args, {"old", "new", "count"});
    std::int64_t count = a.has(2) ? py_index(a.get(2), "count") : -1;
    return Value::string(py_replace(s, string_arg(a.get(0), "old"), string_arg(a.get(1), "new"), count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    BoundArgs a(fn, args, {"sub", "start", "end"});
    std::string window = method_window(s, a, 1);
    std::int64_t offset = 0;
    if (a.has(1)) {
      offset = adjust_slice(static_cast<std::int64_t>(utf8::length(s)), a.get(1), Value(), Value()).start;
    }
    std::int64_t at = py_find(window, string_arg(a.get(0), "sub"), name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) runtime_fail("substring not found");
    return Value::integer(at < 0 ? -1 : at + offset);
  }
  if (name == "count") {
    BoundArgs a(fn, args, {"sub", "start", "end"});
    return Value::integer(py_count(method_window(s, a, 1), string_arg(a.get(0), "sub")));
  }
  if (name == "join") {
    BoundArgs a(fn, args, {"iterable"});
    std::string out;
    std::size_t i = 0;
    for (const Value& item : py_iterate(a.get(0))) {
      if (!item.is_string()) {
        runtime_fail("sequence item " + std::to_string(i) + ": expected str instance, " +
                     item.type_name() + " found");
      }
      if (i++) out += s;
      out += item.as_string();
    }
    return Value::string(std::move(out));
  }
  if (name.starts_with("is")) {
    BoundArgs a(fn, args, {});
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return Value::boolean(py_isdigit(s));
    if (name == "isalpha") return Value::boolean(py_isalpha(s));
    if (name == "isalnum") return Value::boolean(py_isalnum(s));
    if (name == "isspace") return Value::boolean(py_isspace_str(s));
    if (name == "islower") return Value::boolean(py_islower(s));
    if (name == "isupper") return Value::boolean(py_isupper(s));
    if (name == "isascii") {
      return Value::boolean(std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; }));
    }
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    BoundArgs a(fn, args, {"width", "fillchar"});
    std::string fill = a.has(1) ? string_arg(a.get(1), "fillchar") : " ";
    if (utf8::length(fill) != 1) runtime_fail("The fill character must be exactly one character long");
    return Value::string(pad(s, py_index(a.get(0), "width"), fill, name[0]));
  }
  if (name == "zfill") {
    BoundArgs a(fn, args, {"width"});
    std::int64_t width = py_index(a.get(0), "width");
    std::int64_t length = static_cast<std::int64_t>(utf8::length(s));
    if (width <= length) return self;
    std::string sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? s.substr(0, 1) : "";
    return Value::string(sign + std::string(static_cast<std::size_t>(width - length), '0') + s.substr(sign.size()));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    BoundArgs a(fn, args, {"affix"});
    const std::string& affix = string_arg(a.get(0), name);
    if (name == "removeprefix" && s.starts_with(affix)) return Value::string(s.substr(affix.size()));
    if (name == "removesuffix" && !affix.empty() && s.ends_with(affix)) {
      return Value::string(s.substr(0, s.size() - affix.size()));
    }
    return Value::string(s);
  }
  if (name == "partition" || name == "rpartition") {
    BoundArgs a(fn, args, {"sep"});
    const std::string& sep = string_arg(a.get(0), "sep");
    if (sep.empty()) runtime_fail("empty separator");
    std::size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<Value> parts;
    if (at == std::string::npos) {
      parts = name == "partition"
                  ? std::vector<Value>{Value::string(s), Value::string(""), Value::string("")}
                  : std::vector<Value>{Value::string(""), Value::string(""), Value::string(s)};
    } else {
      parts = {Value::string(s.substr(0, at)), Value::string(sep), Value::string(s.substr(at + sep.size()))};
    }
    return Value::sequence(std::move(parts), SeqKind::kTuple);
  }
  if (name == "format") return Value::string(py_format(s, args));
  runtime_fail("str." + name + "() is not supported in chat templates; use a filter instead");
}

Value call_sequence_method(const Value& self, const std::string& name, const CallArgs& args) {
  const auto& items = self.seq().items;
  const std::string fn = self.type_name() + "." + name;
  if (name == "index") {
    BoundArgs a(fn, args, {"value"});
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (py_equal(items[i], a.get(0))) return Value::integer(static_cast<std::int64_t>(i));
    }
    runtime_fail(a.get(0).repr() + " is not in " + self.type_name());
  }
  if (name == "count") {
    BoundArgs a(fn, args, {"value"});
    std::int64_t n = 0;
    for (const Value& item : items) n += py_equal(item, a.get(0)) ? 1 : 0;
    return Value::integer(n);
  }
  BoundArgs a(fn, args, {});  // copy
  return Value::sequence(items, self.seq().kind);
}

Value call_dict_method(const Value& self, const std::string& name, const CallArgs& args) {
  const Mapping& map = self.map();
  const std::string fn = "dict." + name;
  if (name == "get") {
    BoundArgs a(fn, args, {"key", "default"});
    const Value* found = map.find(a.get(0));
    return found ? *found : a.get_or(1, Value::none());
  }
  BoundArgs a(fn, args, {});
  if (name == "copy") return Value::mapping(std::make_shared<Mapping>(map));
  std::vector<Value> items;
  items.reserve(map.entries.size());
  for (const auto& [k, v] : map.entries) {
    if (name == "items") {
      items.push_back(Value::sequence({k, v}, SeqKind::kTuple));
    } else {
      items.push_back(name == "keys" ? k : v);
    }
  }
  SeqKind kind = name == "items" ? SeqKind::kItemsView : name == "keys" ? SeqKind::kKeysView : SeqKind::kValuesView;
  return Value::sequence(std::move(items), kind);
}

// A method bound to its receiver, as `x.upper` gives in Python.
class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override {
    return "<built-in method " + name_ + " of " + self_.type_name() + " object>";
  }
  bool callable() const override { return true; }
  Value call(Interpreter&, CallArgs& args) const override {
    if (self_.is_string()) return call_str_method(self_, name_, args);
    if (self_.is_sequence()) return call_sequence_method(self_, name_, args);
    return call_dict_method(self_, name_, args);
  }

 private:
  Value self_;
  std::string name_;
};

}  // namespace

Value get_attribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!name.empty() && name[0] == '_') {
    return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() +
                            "' object is unsafe.");
  }
  if (has_method(obj, name)) {
    if (contains(kMutating, name)) {
      // ImmutableSandboxedEnvironment's unsafe undefined: prints as "", fails when called.
      return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() +
                              "' object is unsafe.");
    }
    return Value::object(std::make_shared<BoundMethod>(obj, name));
  }
  if (obj.is_mapping()) {
    if (const Value* found = obj.map().find(std::string_view(name))) return *found;
  }
  if (obj.is_object()) return obj.obj().attribute(name);
  return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_mapping()) {
    if (const Value* found = obj.map().find(key)) return *found;
  } else if ((obj.is_string() || (obj.is_sequence() && obj.seq().subscriptable())) && key.is_integral()) {
    std::int64_t i = key.as_int();
    std::int64_t length = py_len(obj);
    if (i < 0) i += length;
    if (i >= 0 && i < length) {
      if (obj.is_string()) {
        auto at = static_cast<std::size_t>(i);
        return Value::string(utf8::substr(obj.as_string(), at, at + 1));
      }
      return obj.seq().items[static_cast<std::size_t>(i)];
    }
  }
  if (key.is_string()) {
    if (obj.is_object()) return obj.obj().attribute(key.as_string());
    if (has_method(obj, key.as_string())) return get_attribute(obj, key.as_string());
    return no_attribute(obj, key.as_string());
  }
  return Value::undefined(object_type(obj) + " has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  for (const Value* part : {&start, &stop, &step}) {
    if (!part->is_undefined() && !part->is_none() && !part->is_integral()) {
      runtime_fail("slice indices must be integers or None or have an __index__ method");
    }
  }
  if (obj.is_string()) {
    std::u32string cps = utf8::decode(obj.as_string());
    SliceRange r = adjust_slice(static_cast<std::int64_t>(cps.size()), start, stop, step);
    std::u32string out;
    for_each_index(r, [&](std::int64_t i) { out.push_back(cps[static_cast<std::size_t>(i)]); });
    return Value::string(utf8::encode(out));
  }
  if (obj.is_sequence() && obj.seq().subscriptable()) {
    const auto& items = obj.seq().items;
    SliceRange r = adjust_slice(static_cast<std::int64_t>(items.size()), start, stop, step);
    std::vector<Value> out;
    for_each_index(r, [&](std::int64_t i) { out.push_back(items[static_cast<std::size_t>(i)]); });
    return Value::sequence(std::move(out), obj.seq().kind);
  }
  // jinja2 slices with Python's own [], so a bad subject is an error, not an Undefined.
  runtime_fail(fmt::format("'{}' object is not subscriptable", obj.type_name()));
}

}  // namespace folio::jinja
