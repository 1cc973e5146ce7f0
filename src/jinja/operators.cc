// Python operator semantics on Values: CPython's results and error messages.
#include "jinja/operators.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/utf8.h"
#include "jinja/error.h"
#include "jinja/string.h"

namespace folio::jinja {

namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  runtime_fail("unsupported operand type(s) for " + std::string(op) + ": '" + a.type_name() +
               "' and '" + b.type_name() + "'");
}

[[noreturn]] void overflow() {
  runtime_fail("integer overflow: the result does not fit in 64 bits");
}

void check_size(std::size_t size, std::size_t max_size) {
  if (size > max_size) {
    throw JinjaError(JinjaError::Kind::kLimit,
                     "the template built a value of " + std::to_string(size) +
                         " bytes or items, over the limit of " + std::to_string(max_size) +
                         "; raise JinjaLimits::max_output_bytes if this input needs it");
  }
}

std::int64_t int_pow(std::int64_t base, std::int64_t exp) {
  std::int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return result;
}

// CPython's float_divmod: the floor quotient and the modulo with the divisor's sign.
std::pair<double, double> float_divmod(double vx, double wx) {
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return {floordiv, mod};
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
  if (op == "/") {
    if (b.as_double() == 0.0) runtime_fail("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (!a.is_float() && !b.is_float()) {
    std::int64_t x = a.as_int(), y = b.as_int(), r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) overflow();
      return Value::integer(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) overflow();
      return Value::integer(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) overflow();
      return Value::integer(r);
    }
    if (op == "//" || op == "%") {
      if (y == 0) runtime_fail("integer division or modulo by zero");
      if (x == std::numeric_limits<std::int64_t>::min() && y == -1) {
        if (op == "%") return Value::integer(0);
        overflow();
      }
      std::int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y >= 0) return Value::integer(int_pow(x, y));
      if (x == 0) runtime_fail("0.0 cannot be raised to a negative power");
      return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "//" || op == "%") {
    if (y == 0.0) runtime_fail(op == "//" ? "float floor division by zero" : "float modulo");
    auto [q, m] = float_divmod(x, y);
    return Value::number(op == "//" ? q : m);
  }
  if (op == "**") {
    if (x == 0.0 && y < 0) runtime_fail("0.0 cannot be raised to a negative power");
    if (x < 0 && std::floor(y) != y) {
      runtime_fail("a negative number raised to a fractional power is complex; not supported");
    }
    double r = std::pow(x, y);
    if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) runtime_fail("(34, 'Numerical result out of range')");
    return Value::number(r);
  }
  unsupported(op, a, b);
}

Value repeat(const Value& seq, std::int64_t times, std::size_t max_size) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (s.empty()) return Value::string("", seq.is_markup());
    check_size(s.size() * static_cast<std::size_t>(std::min<std::int64_t>(times, max_size + 1)), max_size);
    std::string out;
    out.reserve(s.size() * static_cast<std::size_t>(times));
    for (std::int64_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out), seq.is_markup());
  }
  const auto& items = seq.seq().items;
  if (items.empty()) return Value::sequence({}, seq.seq().kind);
  check_size(items.size() * static_cast<std::size_t>(std::min<std::int64_t>(times, max_size + 1)), max_size);
  std::vector<Value> out;
  for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::sequence(std::move(out), seq.seq().kind);
}

bool is_list_or_tuple(const Value& v) {
  return v.is_sequence() && (v.seq().kind == SeqKind::kList || v.seq().kind == SeqKind::kTuple);
}

}  // namespace

Value py_binary(std::string_view op, const Value& a, const Value& b, std::size_t max_size) {
  if (op == "~") {
    std::string s = a.str();
    std::string t = b.str();
    check_size(s.size() + t.size(), max_size);
    return Value::string(s + t);
  }
  // str % x formats before x is looked at: an Undefined x is just an (empty) mapping.
  if (op == "%" && a.is_string()) return Value::string(py_percent_format(a.as_string(), b, max_size));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_size(a.as_string().size() + b.as_string().size(), max_size);
      if (a.is_markup() || b.is_markup()) {
        // Markup + str escapes the str (markupsafe), whichever side it is on.
        std::string left = a.is_markup() ? a.as_string() : html_escape(a.as_string());
        std::string right = b.is_markup() ? b.as_string() : html_escape(b.as_string());
        return Value::string(left + right, true);
      }
      return Value::string(a.as_string() + b.as_string());
    }
    if (a.is_string()) runtime_fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
    if (is_list_or_tuple(a)) {
      if (!b.is_sequence() || b.seq().kind != a.seq().kind) {
        runtime_fail("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                     a.type_name());
      }
      check_size(a.seq().items.size() + b.seq().items.size(), max_size);
      std::vector<Value> items = a.seq().items;
      items.insert(items.end(), b.seq().items.begin(), b.seq().items.end());
      return Value::sequence(std::move(items), a.seq().kind);
    }
    unsupported(op, a, b);
  }
  if (op == "*") {
    bool a_seq = a.is_string() || is_list_or_tuple(a);
    bool b_seq = b.is_string() || is_list_or_tuple(b);
    if (a_seq && b.is_integral()) return repeat(a, b.as_int(), max_size);
    if (b_seq && a.is_integral()) return repeat(b, a.as_int(), max_size);
    if (a_seq || b_seq) {
      runtime_fail("can't multiply sequence by non-int of type '" + (a_seq ? b : a).type_name() + "'");
    }
    unsupported(op, a, b);
  }
  unsupported(op, a, b);
}

std::string py_percent_format(const std::string& format, const Value& args, std::size_t max_size) {
  // CPython: a tuple gives the arguments; anything else is one argument, and
  // one with __getitem__ (dict, list, Undefined) also serves %(name)s and
  // excuses arguments left unused.
  std::vector<Value> positional;
  const bool is_tuple = args.is_sequence() && args.seq().kind == SeqKind::kTuple;
  const bool mapping_like = !is_tuple && (args.is_mapping() || args.is_undefined() ||
                                          (args.is_sequence() && args.seq().subscriptable()));
  const Mapping* named = args.is_mapping() ? &args.map() : nullptr;
  if (is_tuple) {
    positional = args.seq().items;
  } else {
    positional.push_back(args);
  }
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) runtime_fail("incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      std::size_t close = format.find(')', i);
      if (close == std::string::npos) runtime_fail("incomplete format key");
      if (!mapping_like) runtime_fail("format requires a mapping");
      if (args.is_undefined()) fail_undefined(args);
      if (!named) runtime_fail("list indices must be integers or slices, not str");
      const Value* found = named->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (!found) runtime_fail("KeyError: '" + format.substr(i + 1, close - i - 1) + "'");
      arg = found;
      i = close + 1;
    }
    std::string flags;
    while (i < format.size() && std::string_view("-+ 0#").find(format[i]) != std::string_view::npos) {
      flags += format[i++];
    }
    int width = 0, precision = -1;
    while (i < format.size() && format[i] >= '0' && format[i] <= '9') width = width * 10 + (format[i++] - '0');
    if (i < format.size() && format[i] == '.') {
      precision = 0;
      ++i;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        precision = precision * 10 + (format[i++] - '0');
      }
    }
    if (i >= format.size()) runtime_fail("incomplete format");
    const char type = format[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= positional.size()) runtime_fail("not enough arguments for format string");
      arg = &positional[next++];
    }
    std::string text;
    if (type == 's' || type == 'r' || type == 'a') {
      text = type == 's' ? arg->str() : arg->repr();
      if (precision >= 0) text = utf8::substr(text, 0, static_cast<std::size_t>(precision));
    } else if (type == 'd' || type == 'i' || type == 'f' || type == 'F') {
      if (!arg->is_number()) {
        runtime_fail(std::string("%") + type + " format: a real number is required, not " + arg->type_name());
      }
      std::string spec = "%" + flags;
      char buf[512];
      if (type == 'f' || type == 'F') {
        std::snprintf(buf, sizeof buf, (spec + ".*f").c_str(), precision < 0 ? 6 : std::min(precision, 300),
                      arg->as_double());
      } else {
        long long v = arg->is_float() ? static_cast<long long>(std::trunc(arg->as_double())) : arg->as_int();
        std::snprintf(buf, sizeof buf, (spec + "lld").c_str(), v);
      }
      text = buf;
    } else {
      runtime_fail(std::string("the %") + type + " conversion is not supported in chat templates");
    }
    std::size_t length = utf8::length(text);
    if (static_cast<std::size_t>(width) > length) {
      std::string pad(static_cast<std::size_t>(width) - length, ' ');
      bool zero = flags.find('0') != std::string::npos && type != 's' && type != 'r' && type != 'a';
      if (flags.find('-') != std::string::npos) {
        text += pad;
      } else if (zero) {
        std::size_t sign = (!text.empty() && (text[0] == '-' || text[0] == '+' || text[0] == ' ')) ? 1 : 0;
        text.insert(sign, std::string(pad.size(), '0'));
      } else {
        text = pad + text;
      }
    }
    out += text;
    check_size(out.size(), max_size);
  }
  if (!mapping_like && next < positional.size()) {
    runtime_fail("not all arguments converted during string formatting");
  }
  return out;
}

Value py_unary(const Value& v, bool negate) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value::number(negate ? -v.as_double() : v.as_double());
  if (v.is_integral()) {
    std::int64_t i = v.as_int();
    if (!negate) return Value::integer(i);
    if (i == std::numeric_limits<std::int64_t>::min()) overflow();
    return Value::integer(-i);
  }
  runtime_fail(std::string("bad operand type for unary ") + (negate ? "-" : "+") + ": '" + v.type_name() + "'");
}

bool py_contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        runtime_fail("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kSequence:
      for (const Value& v : py_iterate(container)) {
        if (py_equal(v, item)) return true;
      }
      return false;
    case Value::Kind::kMapping:
      if (item.is_mapping() || (item.is_sequence() && item.seq().kind != SeqKind::kTuple)) {
        runtime_fail("unhashable type: '" + item.type_name() + "'");
      }
      return container.map().find(item) != nullptr;
    default:
      runtime_fail("argument of type '" + container.type_name() + "' is not iterable");
  }
}

std::int64_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<std::int64_t>(utf8::length(v.as_string()));
    case Value::Kind::kSequence:
      if (!v.seq().has_len()) runtime_fail("object of type '" + v.type_name() + "' has no len()");
      return static_cast<std::int64_t>(v.seq().items.size());
    case Value::Kind::kMapping: return static_cast<std::int64_t>(v.map().entries.size());
    default: runtime_fail("object of type '" + v.type_name() + "' has no len()");
  }
}

std::vector<Value> py_iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kString: {
      std::vector<Value> chars;
      std::string one;
      for (char32_t c : utf8::decode(v.as_string())) {
        one.clear();
        utf8::append(one, c);
        chars.push_back(Value::string(one));
      }
      return chars;
    }
    case Value::Kind::kSequence: {
      Sequence& s = v.seq();
      if (s.kind != SeqKind::kGenerator) return s.items;
      if (s.consumed) return {};
      s.consumed = true;
      return s.items;
    }
    case Value::Kind::kMapping: {
      std::vector<Value> keys;
      keys.reserve(v.map().entries.size());
      for (const auto& entry : v.map().entries) keys.push_back(entry.first);
      return keys;
    }
    default: runtime_fail("'" + v.type_name() + "' object is not iterable");
  }
}

std::int64_t py_index(const Value& v, std::string_view what) {
  if (v.is_integral()) return v.as_int();
  if (v.is_undefined()) fail_undefined(v);
  runtime_fail(std::string(what) + " must be an integer, not '" + v.type_name() + "'");
}

}  // namespace folio::jinja
