// jinja2's filters over Values, and Hugging Face's tojson.
#include "jinja/filters.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "core/utf8.h"
#include "jinja/error.h"
#include "jinja/interpreter.h"
#include "jinja/json.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/string.h"

namespace folio::jinja {

namespace {

Value str_value(std::string s) { return Value::string(std::move(s)); }

// jinja2's ignore_case: strings compare lower-cased unless case_sensitive.
Value fold_case(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value::string(py_lower(v.as_string())) : v;
}

// make_attrgetter's path: "a.b.0" -> ["a", "b", 0]; an int stays one part.
std::vector<Value> attribute_path(const Value& attribute) {
  std::vector<Value> parts;
  if (attribute.is_undefined() || attribute.is_none()) return parts;
  if (!attribute.is_string()) {
    parts.push_back(attribute);
    return parts;
  }
  for (const std::string& part : py_split(attribute.as_string(), std::string("."), -1, false)) {
    bool digits = !part.empty() && py_isdigit(part) &&
                  std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) {
      std::int64_t i = 0;
      std::from_chars(part.data(), part.data() + part.size(), i);
      parts.push_back(Value::integer(i));
    } else {
      parts.push_back(Value::string(part));
    }
  }
  return parts;
}

// Follows a path with environment.getitem; `fallback` replaces an undefined step.
Value follow(Value item, const std::vector<Value>& path, const Value* fallback = nullptr) {
  for (const Value& part : path) {
    item = get_item(item, part);
    if (fallback && item.is_undefined()) item = *fallback;
  }
  return item;
}

// Strict less-than of sort keys (lists compare element-wise, as Python lists do).
bool key_less(const std::vector<Value>& a, const std::vector<Value>& b) {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!py_equal(a[i], b[i])) return py_compare(a[i], b[i], "<");
  }
  return a.size() < b.size();
}

Value generator(std::vector<Value> items) { return Value::sequence(std::move(items), SeqKind::kGenerator); }

// --- filters ----------------------------------------------------------------

Value f_abs(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("abs", args, {});
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (v.is_integral()) {
    std::int64_t i = v.as_int();
    if (i == std::numeric_limits<std::int64_t>::min()) runtime_fail("integer overflow in abs()");
    return Value::integer(i < 0 ? -i : i);
  }
  if (v.is_undefined()) fail_undefined(v);
  runtime_fail("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_batch(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("batch", args, {"linecount", "fill_with"});
  std::int64_t count = py_index(a.get(0), "linecount");
  const Value fill = a.get_or(1, Value::none());
  std::vector<Value> batches, current;
  for (const Value& item : py_iterate(v)) {
    interp.step();
    if (static_cast<std::int64_t>(current.size()) == count) {
      batches.push_back(Value::sequence(std::move(current)));
      current.clear();
    }
    current.push_back(item);
  }
  if (!current.empty()) {
    if (!fill.is_none()) {
      while (static_cast<std::int64_t>(current.size()) < count) current.push_back(fill);
    }
    batches.push_back(Value::sequence(std::move(current)));
  }
  return generator(std::move(batches));
}

Value f_capitalize(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("capitalize", args, {});
  return str_value(py_capitalize(v.str()));
}

Value f_center(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("center", args, {"width"});
  CallArgs method_args;
  method_args.positional.push_back(a.get_or(0, Value::integer(80)));
  std::int64_t width = py_index(method_args.positional[0], "width");
  if (width > 0) interp.check_size(static_cast<std::size_t>(width));
  return interp.call(get_attribute(Value::string(v.str()), "center"), method_args);
}

Value f_length(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("length", args, {});
  return Value::integer(py_len(v));
}

Value f_default(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("default", args, {"default_value", "boolean"});
  bool boolean = a.get_or(1, Value::boolean(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return a.get_or(0, Value::string(""));
  return v;
}

Value f_dictsort(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("dictsort", args, {"case_sensitive", "by", "reverse"});
  bool case_sensitive = a.get_or(0, Value::boolean(false)).truthy();
  std::string by = a.get_or(1, Value::string("key")).str();
  bool reverse = a.get_or(2, Value::boolean(false)).truthy();
  if (by != "key" && by != "value") runtime_fail("You can only sort by either \"key\" or \"value\"");
  if (!v.is_mapping()) {
    if (v.is_undefined()) fail_undefined(v);
    runtime_fail("'" + v.type_name() + "' object has no attribute 'items'");
  }
  std::size_t pos = by == "key" ? 0 : 1;
  std::vector<std::pair<Value, Value>> entries = v.map().entries;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    interp.step();
    const Value kx = fold_case(pos == 0 ? x.first : x.second, case_sensitive);
    const Value ky = fold_case(pos == 0 ? y.first : y.second, case_sensitive);
    return reverse ? py_compare(ky, kx, "<") : py_compare(kx, ky, "<");
  });
  std::vector<Value> items;
  for (auto& [k, val] : entries) items.push_back(Value::sequence({k, val}, SeqKind::kTuple));
  return Value::sequence(std::move(items));
}

Value f_escape(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("escape", args, {});
  if (v.is_markup()) return v;
  return Value::string(html_escape(v.str()), true);
}

Value f_forceescape(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("forceescape", args, {});
  return Value::string(html_escape(v.str()), true);
}

Value f_first(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("first", args, {});
  std::vector<Value> items = py_iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("last", args, {});
  if (v.is_sequence() && v.seq().kind == SeqKind::kGenerator) {
    runtime_fail("'generator' object is not reversible");
  }
  std::vector<Value> items = py_iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

// float() of a str, as Python parses it (whitespace, underscores, inf/nan).
std::optional<double> parse_py_float(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  std::string lower = py_lower(s);
  std::string body = (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) ? lower.substr(1) : lower;
  bool negative = !lower.empty() && lower[0] == '-';
  if (body == "inf" || body == "infinity") return negative ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  std::string clean;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      bool ok = i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!ok) return std::nullopt;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty()) return std::nullopt;
  const char* begin = clean.data() + (clean[0] == '+' ? 1 : 0);
  double value = 0;
  auto result = std::from_chars(begin, clean.data() + clean.size(), value);
  if (result.ptr != clean.data() + clean.size()) return std::nullopt;
  if (result.ec == std::errc::result_out_of_range) {
    value = std::abs(value) < 1 ? 0.0 * (clean[0] == '-' ? -1 : 1) : (clean[0] == '-' ? -INFINITY : INFINITY);
  } else if (result.ec != std::errc()) {
    return std::nullopt;
  }
  return value;
}

// int(text, base) as Python parses it; nullopt where Python raises ValueError.
std::optional<std::int64_t> parse_py_int(const std::string& text, std::int64_t base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  bool negative = false;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    char p = static_cast<char>(s[i + 1] | 0x20);
    if ((p == 'x' && base == 16) || (p == 'o' && base == 8) || (p == 'b' && base == 2)) {
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  std::string digits;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits += s[i];
  }
  if (digits.empty() || base < 2 || base > 36) return std::nullopt;
  std::uint64_t value = 0;
  auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value, static_cast<int>(base));
  if (result.ptr != digits.data() + digits.size()) return std::nullopt;
  if (result.ec != std::errc() || value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    runtime_fail("the integer " + text + " does not fit in 64 bits");
  }
  std::int64_t signed_value = static_cast<std::int64_t>(value);
  return negative ? -signed_value : signed_value;
}

Value f_float(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("float", args, {"default"});
  Value fallback = a.get_or(0, Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_string()) {
    if (auto d = parse_py_float(v.as_string())) return Value::number(*d);
  }
  return fallback;
}

std::optional<std::int64_t> double_to_int(double d) {
  if (std::isnan(d)) return std::nullopt;
  if (std::isinf(d)) runtime_fail("cannot convert float infinity to integer");
  if (std::fabs(d) >= 9.2e18) runtime_fail("the integer " + py_float_repr(d) + " does not fit in 64 bits");
  return static_cast<std::int64_t>(std::trunc(d));
}

Value f_int(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("int", args, {"default", "base"});
  Value fallback = a.get_or(0, Value::integer(0));
  std::int64_t base = a.has(1) ? py_index(a.get(1), "base") : 10;
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) {
    auto i = double_to_int(v.as_double());
    return i ? Value::integer(*i) : fallback;
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.as_string(), base)) return Value::integer(*i);
    if (auto d = parse_py_float(v.as_string())) {
      if (std::isinf(*d)) return fallback;  // int(float("inf")) overflows; jinja2 returns the default
      if (auto i = double_to_int(*d)) return Value::integer(*i);
    }
  }
  return fallback;
}

Value f_indent(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("indent", args, {"width", "first", "blank"});
  const Value width = a.get_or(0, Value::integer(4));
  std::string indention;
  if (width.is_string()) {
    indention = width.as_string();
  } else {
    indention.assign(static_cast<std::size_t>(std::max<std::int64_t>(0, py_index(width, "width"))), ' ');
  }
  bool first = a.get_or(1, Value::boolean(false)).truthy();
  bool blank = a.get_or(2, Value::boolean(false)).truthy();
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) runtime_fail("unsupported operand type(s) for +=: '" + v.type_name() + "' and 'str'");
  std::string s = v.as_string() + "\n";  // jinja2's quirk for splitlines
  std::vector<std::string> lines = py_splitlines(s, false);
  std::string out;
  if (blank) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (first) out = indention + out;
  interp.check_size(out.size());
  return str_value(std::move(out));
}

Value f_join(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("join", args, {"d", "attribute"});
  std::string separator = a.get_or(0, Value::string("")).str();
  std::vector<Value> path = attribute_path(a.get(1));
  std::string out;
  bool first = true;
  for (const Value& item : py_iterate(v)) {
    interp.step();
    if (!first) out += separator;
    first = false;
    out += (path.empty() ? item : follow(item, path)).str();
    interp.check_size(out.size());
  }
  return str_value(std::move(out));
}

Value f_list(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("list", args, {});
  return Value::sequence(py_iterate(v));
}

Value f_lower(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("lower", args, {});
  return str_value(py_lower(v.str()));
}

Value f_upper(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("upper", args, {});
  return str_value(py_upper(v.str()));
}

Value f_title(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("title", args, {});
  return str_value(jinja_title(v.str()));
}

Value f_trim(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("trim", args, {"chars"});
  std::optional<std::string> chars;
  if (a.has(0) && !a.get(0).is_none()) chars = a.get(0).str();
  return str_value(py_strip(v.str(), chars, true, true));
}

Value f_items(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("items", args, {});
  if (v.is_undefined()) return generator({});
  if (!v.is_mapping()) runtime_fail("Can only get item pairs from a mapping.");
  std::vector<Value> items;
  for (const auto& [k, val] : v.map().entries) items.push_back(Value::sequence({k, val}, SeqKind::kTuple));
  return generator(std::move(items));
}

Value f_map(Interpreter& interp, const Value& v, const CallArgs& args) {
  std::vector<Value> out;
  if (!v.truthy()) return generator(std::move(out));  // jinja2 maps nothing over a false value
  bool by_attribute = args.positional.empty();
  for (const auto& [k, val] : args.keyword) by_attribute = by_attribute && (k == "attribute" || k == "default");
  if (by_attribute) {
    const Value* attribute = nullptr;
    const Value* fallback = nullptr;
    for (const auto& [k, val] : args.keyword) {
      if (k == "attribute") attribute = &val;
      if (k == "default") fallback = &val;
    }
    if (!attribute) runtime_fail("map requires a filter argument");
    std::vector<Value> path = attribute_path(*attribute);
    if (fallback && fallback->is_none()) fallback = nullptr;
    for (const Value& item : py_iterate(v)) {
      interp.step();
      out.push_back(follow(item, path, fallback));
    }
    return generator(std::move(out));
  }
  if (args.positional.empty()) runtime_fail("map requires a filter argument");
  std::string name = args.positional[0].str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : py_iterate(v)) {
    interp.step();
    out.push_back(interp.apply_filter(name, item, rest));
  }
  return generator(std::move(out));
}

Value min_or_max(Interpreter& interp, const Value& v, const CallArgs& args, bool want_max) {
  BoundArgs a(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  bool case_sensitive = a.get_or(0, Value::boolean(false)).truthy();
  std::vector<Value> path = attribute_path(a.get(1));
  std::vector<Value> items = py_iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  std::size_t best = 0;
  Value best_key = fold_case(follow(items[0], path), case_sensitive);
  for (std::size_t i = 1; i < items.size(); ++i) {
    interp.step();
    Value key = fold_case(follow(items[i], path), case_sensitive);
    if (py_compare(key, best_key, want_max ? ">" : "<")) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Value f_min(Interpreter& interp, const Value& v, const CallArgs& args) { return min_or_max(interp, v, args, false); }
Value f_max(Interpreter& interp, const Value& v, const CallArgs& args) { return min_or_max(interp, v, args, true); }

// select/reject/selectattr/rejectattr: jinja2 yields nothing for a false value.
Value select_or_reject(Interpreter& interp, const Value& v, const CallArgs& args, bool select,
                       bool by_attribute) {
  std::vector<Value> out;
  if (!v.truthy()) return generator(std::move(out));
  std::size_t offset = 0;
  std::vector<Value> path;
  if (by_attribute) {
    if (args.positional.empty()) runtime_fail("Missing parameter for attribute name");
    path = attribute_path(args.positional[0]);
    offset = 1;
  }
  bool has_test = args.positional.size() > offset;
  std::string test = has_test ? args.positional[offset].str() : "";
  CallArgs test_args;
  if (has_test) {
    auto first = args.positional.begin() + static_cast<std::ptrdiff_t>(offset) + 1;
    test_args.positional.assign(first, args.positional.end());
  }
  test_args.keyword = args.keyword;
  for (const Value& item : py_iterate(v)) {
    interp.step();
    Value subject = by_attribute ? follow(item, path) : item;
    bool ok = has_test ? interp.apply_test(test, subject, test_args) : subject.truthy();
    if (ok == select) out.push_back(item);
  }
  return generator(std::move(out));
}

Value f_select(Interpreter& i, const Value& v, const CallArgs& a) { return select_or_reject(i, v, a, true, false); }
Value f_reject(Interpreter& i, const Value& v, const CallArgs& a) { return select_or_reject(i, v, a, false, false); }
Value f_selectattr(Interpreter& i, const Value& v, const CallArgs& a) { return select_or_reject(i, v, a, true, true); }
Value f_rejectattr(Interpreter& i, const Value& v, const CallArgs& a) { return select_or_reject(i, v, a, false, true); }

Value f_replace(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("replace", args, {"old", "new", "count"});
  std::int64_t count = (a.has(2) && !a.get(2).is_none()) ? py_index(a.get(2), "count") : -1;
  std::string out = py_replace(v.str(), a.get(0).str(), a.get(1).str(), count);
  interp.check_size(out.size());
  return str_value(std::move(out));
}

Value f_reverse(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("reverse", args, {});
  if (v.is_string()) {
    std::u32string cps = utf8::decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return str_value(utf8::encode(cps));
  }
  if (v.is_none() || v.is_number() || v.is_object()) runtime_fail("argument must be iterable");
  bool was_generator = v.is_sequence() && v.seq().kind == SeqKind::kGenerator;
  std::vector<Value> items = py_iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() gives an iterator; a generator, not reversible, becomes a list.
  return was_generator ? Value::sequence(std::move(items)) : generator(std::move(items));
}

Value f_round(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("round", args, {"precision", "method"});
  std::int64_t precision = a.has(0) ? py_index(a.get(0), "precision") : 0;
  std::string method = a.get_or(1, Value::string("common")).str();
  if (method != "common" && method != "ceil" && method != "floor") {
    runtime_fail("method must be common, ceil or floor");
  }
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) runtime_fail("type " + v.type_name() + " doesn't define __round__ method");
  if (method != "common") {
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = v.as_double() * scale;
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (v.is_integral()) {
    std::int64_t i = v.as_int();
    if (precision >= 0) return Value::integer(i);
    if (precision < -18) return Value::integer(0);
    std::int64_t unit = 1;
    for (std::int64_t k = 0; k < -precision; ++k) unit *= 10;
    std::int64_t q = i / unit, r = i % unit;
    if (r < 0) {
      --q;
      r += unit;
    }
    if (2 * r > unit || (2 * r == unit && (q & 1))) ++q;
    return Value::integer(q * unit);
  }
  double x = v.as_double();
  if (!std::isfinite(x)) return Value::number(x);
  if (precision >= 0) {
    // Correct rounding of the exact binary value, ties to even, as CPython's round().
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<std::int64_t>(precision, 300)), x);
    double r = 0;
    std::from_chars(buf, buf + std::strlen(buf), r);
    return Value::number(r);
  }
  double unit = std::pow(10.0, static_cast<double>(-precision));
  return Value::number(std::nearbyint(x / unit) * unit);
}

Value f_safe(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("safe", args, {});
  return Value::string(v.str(), true);
}

Value f_sort(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool reverse = a.get_or(0, Value::boolean(false)).truthy();
  bool case_sensitive = a.get_or(1, Value::boolean(false)).truthy();
  // make_multi_attrgetter: "a,b" sorts by a then b.
  std::vector<std::vector<Value>> paths;
  const Value& attribute = a.get(2);
  if (attribute.is_string()) {
    for (const std::string& part : py_split(attribute.as_string(), std::string(","), -1, false)) {
      paths.push_back(attribute_path(Value::string(part)));
    }
  } else {
    paths.push_back(attribute_path(attribute));
  }
  std::vector<Value> items = py_iterate(v);
  std::vector<std::pair<std::vector<Value>, Value>> keyed;
  for (Value& item : items) {
    std::vector<Value> key;
    for (const auto& path : paths) key.push_back(fold_case(follow(item, path), case_sensitive));
    keyed.emplace_back(std::move(key), std::move(item));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    interp.step();
    return reverse ? key_less(y.first, x.first) : key_less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::sequence(std::move(out));
}

Value f_string(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("string", args, {});
  if (v.is_string()) return v;
  return str_value(v.str());
}

Value f_sum(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("sum", args, {"attribute", "start"});
  std::vector<Value> path = attribute_path(a.get(0));
  Value total = a.get_or(1, Value::integer(0));
  if (total.is_string()) runtime_fail("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : py_iterate(v)) {
    interp.step();
    total = py_binary("+", total, follow(item, path), SIZE_MAX);
  }
  return total;
}

Value f_unique(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("unique", args, {"case_sensitive", "attribute"});
  bool case_sensitive = a.get_or(0, Value::boolean(false)).truthy();
  std::vector<Value> path = attribute_path(a.get(1));
  std::vector<Value> seen, out;
  for (const Value& item : py_iterate(v)) {
    Value key = fold_case(follow(item, path), case_sensitive);
    bool found = false;
    for (const Value& s : seen) {
      interp.step();
      if (py_equal(s, key)) {
        found = true;
        break;
      }
    }
    if (!found) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("wordcount", args, {});
  std::int64_t words = 0;
  bool in_word = false;
  for (char32_t c : utf8::decode(v.str())) {
    bool w = py_is_word_char(c);
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::integer(words);
}

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Interpreter& interp, const Value& v, const CallArgs& args) {
  BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions options;
  options.ensure_ascii = a.get_or(0, Value::boolean(false)).truthy();
  const Value& indent = a.get(1);
  if (indent.is_string()) {
    options.indent = indent.as_string();
  } else if (indent.is_integral()) {
    options.indent = std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(indent.as_int(), 0, 1024)), ' ');
  } else if (!indent.is_undefined() && !indent.is_none()) {
    runtime_fail("tojson indent must be an int or a str, not " + indent.type_name());
  }
  const Value& separators = a.get(2);
  if (!separators.is_undefined() && !separators.is_none()) {
    std::vector<Value> parts = py_iterate(separators);
    if (parts.size() != 2) runtime_fail("tojson separators must be an (item_separator, key_separator) pair");
    options.item_separator = parts[0].str();
    options.key_separator = parts[1].str();
  }
  options.sort_keys = a.get_or(3, Value::boolean(false)).truthy();
  std::string out = dump_json(v, options);
  interp.check_size(out.size());
  return str_value(std::move(out));
}

// jinja2's format filter: value % args (or % kwargs), printf-style.
Value f_format(Interpreter& interp, const Value& v, const CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    runtime_fail("can't handle positional and keyword arguments at the same time");
  }
  Value subject;
  if (!args.keyword.empty()) {
    auto map = std::make_shared<Mapping>();
    for (const auto& [k, val] : args.keyword) map->set(Value::string(k), val);
    subject = Value::mapping(std::move(map));
  } else {
    subject = Value::sequence(args.positional, SeqKind::kTuple);
  }
  std::string out = py_percent_format(v.str(), subject, SIZE_MAX);
  interp.check_size(out.size());
  return str_value(std::move(out));
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  static const std::map<std::string_view, FilterFn> kFilters = {
      {"abs", f_abs},           {"batch", f_batch},           {"capitalize", f_capitalize},
      {"center", f_center},     {"count", f_length},          {"d", f_default},
      {"default", f_default},   {"dictsort", f_dictsort},     {"e", f_escape},
      {"escape", f_escape},     {"first", f_first},           {"float", f_float},
      {"forceescape", f_forceescape}, {"format", f_format}, {"indent", f_indent},
      {"int", f_int},           {"items", f_items},           {"join", f_join},
      {"last", f_last},         {"length", f_length},         {"list", f_list},
      {"lower", f_lower},       {"map", f_map},               {"max", f_max},
      {"min", f_min},           {"reject", f_reject},         {"rejectattr", f_rejectattr},
      {"replace", f_replace},   {"reverse", f_reverse},       {"round", f_round},
      {"safe", f_safe},         {"select", f_select},         {"selectattr", f_selectattr},
      {"sort", f_sort},         {"string", f_string},         {"sum", f_sum},
      {"title", f_title},       {"tojson", f_tojson},         {"trim", f_trim},
      {"unique", f_unique},     {"upper", f_upper},           {"wordcount", f_wordcount},
  };
  auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

}  // namespace folio::jinja
