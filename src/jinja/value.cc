// Value: Python's truthiness, str(), repr(), == and ordering for Jinja values.
#include "jinja/value.h"

#include <fmt/format.h>

#include <cmath>

#include "jinja/error.h"
#include "jinja/string.h"

namespace folio::jinja {

namespace {

const std::string& empty_string() {
  static const std::string empty;
  return empty;
}

std::string sequence_repr(const Sequence& s) {
  auto join = [&s](std::string_view open, std::string_view close) {
    std::string out(open);
    for (std::size_t i = 0; i < s.items.size(); ++i) {
      if (i) out += ", ";
      out += s.items[i].repr();
    }
    if (s.kind == SeqKind::kTuple && s.items.size() == 1) out += ",";
    out += close;
    return out;
  };
  switch (s.kind) {
    case SeqKind::kList: return join("[", "]");
    case SeqKind::kTuple: return join("(", ")");
    case SeqKind::kGenerator: return "<generator object>";
    case SeqKind::kItemsView: return join("dict_items([", "])");
    case SeqKind::kKeysView: return join("dict_keys([", "])");
    case SeqKind::kValuesView: return join("dict_values([", "])");
  }
  return "";
}

bool is_hashable(const Value& v) {
  if (v.is_mapping()) return false;
  if (v.is_sequence()) {
    if (v.seq().kind != SeqKind::kTuple) return v.seq().kind == SeqKind::kGenerator;
    for (const Value& item : v.seq().items) {
      if (!is_hashable(item)) return false;
    }
  }
  return true;
}

}  // namespace

Value Value::undefined(std::string hint) {
  return Value(Undefined{std::make_shared<const std::string>(std::move(hint))});
}

Value Value::string(std::string text, bool markup) {
  return Value(Str{std::make_shared<const std::string>(std::move(text)), markup});
}

Value Value::sequence(std::vector<Value> items, SeqKind kind) {
  auto s = std::make_shared<Sequence>();
  s->items = std::move(items);
  s->kind = kind;
  return Value(std::move(s));
}

Value Value::mapping(std::shared_ptr<Mapping> map) { return Value(std::move(map)); }

std::int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<std::int64_t>(data_);
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const std::string& Value::undefined_hint() const {
  const auto& hint = std::get<Undefined>(data_).hint;
  return hint ? *hint : empty_string();
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return as_bool();
    case Kind::kInt: return as_int() != 0;
    case Kind::kFloat: return as_double() != 0.0;
    case Kind::kString: return !as_string().empty();
    case Kind::kSequence:
      // A generator object is true even when it would yield nothing.
      return seq().kind == SeqKind::kGenerator || !seq().items.empty();
    case Kind::kMapping: return !map().entries.empty();
    case Kind::kObject: return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind()) {
    case Kind::kUndefined: return "";
    case Kind::kString: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(as_int());
    case Kind::kFloat: return py_float_repr(as_double());
    case Kind::kString:
      return is_markup() ? "Markup(" + py_repr(as_string()) + ")" : py_repr(as_string());
    case Kind::kSequence: return sequence_repr(seq());
    case Kind::kMapping: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : map().entries) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::kObject: return obj().repr();
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return is_markup() ? "Markup" : "str";
    case Kind::kSequence:
      switch (seq().kind) {
        case SeqKind::kList: return "list";
        case SeqKind::kTuple: return "tuple";
        case SeqKind::kGenerator: return "generator";
        case SeqKind::kItemsView: return "dict_items";
        case SeqKind::kKeysView: return "dict_keys";
        case SeqKind::kValuesView: return "dict_values";
      }
      return "list";
    case Kind::kMapping: return "dict";
    case Kind::kObject: return obj().type_name();
  }
  return "object";
}

const Value* Mapping::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : entries) {
    if (py_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Mapping::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Mapping::set(Value key, Value value) {
  if (!is_hashable(key)) runtime_fail("unhashable type: '" + key.type_name() + "' used as a dict key");
  for (auto& [k, v] : entries) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

std::string Object::repr() const { return fmt::format("<{} object>", type_name()); }

Value Object::attribute(const std::string& name) const {
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(), name));
}

Value Object::call(Interpreter&, CallArgs&) const {
  runtime_fail(fmt::format("'{}' object is not callable", type_name()));
}

bool py_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.as_string() == b.as_string();
    case K::kSequence: {
      const Sequence& x = a.seq();
      const Sequence& y = b.seq();
      if (&x == &y) return true;
      if (x.kind != y.kind || x.kind == SeqKind::kGenerator) return false;
      if (x.items.size() != y.items.size()) return false;
      if (x.kind == SeqKind::kItemsView || x.kind == SeqKind::kKeysView) {
        for (const Value& item : x.items) {
          bool found = false;
          for (const Value& other : y.items) found = found || py_equal(item, other);
          if (!found) return false;
        }
        return true;
      }
      if (x.kind == SeqKind::kValuesView) return false;  // Python compares dict_values by identity
      for (std::size_t i = 0; i < x.items.size(); ++i) {
        if (!py_equal(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case K::kMapping: {
      const Mapping& x = a.map();
      const Mapping& y = b.map();
      if (&x == &y) return true;
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !py_equal(v, *other)) return false;
      }
      return true;
    }
    case K::kObject: return a.object_ptr() == b.object_ptr();
    default: return false;
  }
}

bool py_compare(const Value& a, const Value& b, std::string_view op) {
  auto apply = [op](auto x, auto y) {
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    return x >= y;
  };
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return apply(a.as_double(), b.as_double());
    return apply(a.as_int(), b.as_int());
  }
  if (a.is_string() && b.is_string()) return apply(a.as_string().compare(b.as_string()), 0);
  if (a.is_sequence() && b.is_sequence() && a.seq().kind == b.seq().kind &&
      (a.seq().kind == SeqKind::kList || a.seq().kind == SeqKind::kTuple)) {
    const auto& x = a.seq().items;
    const auto& y = b.seq().items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_compare(x[i], y[i], op);
    }
    return apply(x.size(), y.size());
  }
  runtime_fail("'" + std::string(op) + "' not supported between instances of '" + a.type_name() +
               "' and '" + b.type_name() + "'");
}

BoundArgs::BoundArgs(std::string_view function, const CallArgs& args,
                     std::initializer_list<std::string_view> params)
    : bound_(params.size(), nullptr) {
  if (args.positional.size() > params.size()) {
    runtime_fail(std::string(function) + "() takes at most " + std::to_string(params.size()) +
                 " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  for (std::size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    std::size_t i = 0;
    for (std::string_view p : params) {
      if (p == name) break;
      ++i;
    }
    if (i == params.size()) {
      runtime_fail(std::string(function) + "() got an unexpected keyword argument '" + name + "'");
    }
    if (bound_[i]) {
      runtime_fail(std::string(function) + "() got multiple values for argument '" + name + "'");
    }
    bound_[i] = &value;
  }
}

const Value& BoundArgs::get(std::size_t i) const {
  static const Value missing;
  return bound_[i] ? *bound_[i] : missing;
}

void fail_undefined(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  runtime_fail(hint.empty() ? "a value is undefined" : hint);
}

}  // namespace folio::jinja
