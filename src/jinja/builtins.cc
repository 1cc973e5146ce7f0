// The global functions of HF's chat-template environment.
#include "jinja/builtins.h"

#include <ctime>
#include <memory>

#include "jinja/error.h"
#include "jinja/operators.h"

namespace folio::jinja {

namespace {

using BuiltinFn = Value (*)(Interpreter&, const CallArgs&);

class BuiltinFunction : public Object {
 public:
  BuiltinFunction(std::string name, BuiltinFn fn) : name_(std::move(name)), fn_(fn) {}
  std::string type_name() const override { return "function"; }
  std::string repr() const override { return "<function " + name_ + ">"; }
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) const override { return fn_(interp, args); }

 private:
  std::string name_;
  BuiltinFn fn_;
};

void no_keywords(std::string_view function, const CallArgs& args) {
  if (!args.keyword.empty()) runtime_fail(std::string(function) + "() takes no keyword arguments");
}

// dict(mapping or pairs, **kwargs) into `map`.
void update_from(Mapping& map, const CallArgs& args, std::string_view function) {
  if (args.positional.size() > 1) {
    runtime_fail(std::string(function) + " expected at most 1 positional argument, got " +
                 std::to_string(args.positional.size()));
  }
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_mapping()) {
      for (const auto& [k, v] : source.map().entries) map.set(k, v);
    } else {
      for (const Value& pair : py_iterate(source)) {
        std::vector<Value> kv = py_iterate(pair);
        if (kv.size() != 2) {
          runtime_fail("dictionary update sequence element has length " + std::to_string(kv.size()) +
                       "; 2 is required");
        }
        map.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) map.set(Value::string(k), v);
}

Value builtin_range(Interpreter& interp, const CallArgs& args) {
  no_keywords("range", args);
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) {
    runtime_fail("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  }
  std::int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = py_index(p[0], "range() argument");
  } else {
    start = py_index(p[0], "range() argument");
    stop = py_index(p[1], "range() argument");
    if (p.size() == 3) step = py_index(p[2], "range() argument");
  }
  if (step == 0) runtime_fail("range() arg 3 must not be zero");
  // Lengths computed in long double so extreme bounds cannot overflow.
  long double span = step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
  long double length = span <= 0 ? 0 : (span + (step > 0 ? step : -step) - 1) / (step > 0 ? step : -step);
  if (length > kMaxRange) {
    runtime_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  interp.check_size(static_cast<std::size_t>(length));
  std::vector<Value> items;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
  return Value::sequence(std::move(items));
}

Value builtin_dict(Interpreter&, const CallArgs& args) {
  auto map = std::make_shared<Mapping>();
  update_from(*map, args, "dict");
  return Value::mapping(std::move(map));
}

Value builtin_namespace(Interpreter& interp, const CallArgs& args) {
  Mapping attrs;
  update_from(attrs, args, "namespace");
  auto ns = std::make_shared<Namespace>();
  for (auto& [k, v] : attrs.entries) {
    if (!k.is_string()) runtime_fail("namespace() keys must be strings, not " + k.type_name());
    ns->set_attribute(k.as_string(), v);
  }
  interp.track(ns);  // {% set ns.self = ns %} would otherwise never be freed
  return Value::object(std::move(ns));
}

class Joiner : public Object {
 public:
  explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
  std::string type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Interpreter&, CallArgs& args) const override {
    BoundArgs a("joiner", args, {});
    if (!used_) {
      used_ = true;
      return Value::string("");
    }
    return Value::string(sep_);
  }

 private:
  std::string sep_;
  mutable bool used_ = false;
};

Value builtin_joiner(Interpreter&, const CallArgs& args) {
  BoundArgs a("joiner", args, {"sep"});
  return Value::object(std::make_shared<Joiner>(a.get_or(0, Value::string(", ")).str()));
}

class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
 public:
  explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
  std::string type_name() const override { return "Cycler"; }
  Value attribute(const std::string& name) const override;
  Value current() const { return items_[pos_]; }
  Value next() const {
    Value v = items_[pos_];
    pos_ = (pos_ + 1) % items_.size();
    return v;
  }
  void reset() const { pos_ = 0; }

 private:
  std::vector<Value> items_;
  mutable std::size_t pos_ = 0;
};

class CyclerMethod : public Object {
 public:
  CyclerMethod(std::shared_ptr<const Cycler> cycler, std::string name)
      : cycler_(std::move(cycler)), name_(std::move(name)) {}
  std::string type_name() const override { return "method"; }
  bool callable() const override { return true; }
  Value call(Interpreter&, CallArgs& args) const override {
    BoundArgs a("Cycler." + name_, args, {});
    if (name_ == "next") return cycler_->next();
    cycler_->reset();
    return Value::none();
  }

 private:
  std::shared_ptr<const Cycler> cycler_;
  std::string name_;
};

Value Cycler::attribute(const std::string& name) const {
  if (name == "current") return current();
  if (name == "next" || name == "reset") {
    return Value::object(std::make_shared<CyclerMethod>(shared_from_this(), name));
  }
  return Object::attribute(name);
}

Value builtin_cycler(Interpreter&, const CallArgs& args) {
  no_keywords("cycler", args);
  if (args.positional.empty()) runtime_fail("at least one item has to be provided to cycler()");
  return Value::object(std::make_shared<Cycler>(args.positional));
}

Value builtin_raise_exception(Interpreter&, const CallArgs& args) {
  BoundArgs a("raise_exception", args, {"message"});
  if (!a.has(0)) runtime_fail("raise_exception() missing 1 required positional argument: 'message'");
  throw JinjaError(JinjaError::Kind::kRaised, a.get(0).str());
}

Value builtin_strftime_now(Interpreter& interp, const CallArgs& args) {
  BoundArgs a("strftime_now", args, {"format"});
  if (!a.get(0).is_string()) runtime_fail("strftime() argument 1 must be str, not " + a.get(0).type_name());
  // datetime.strftime handles %f, %z and %Z itself (a naive local time has
  // no zone, and the clock here has whole seconds); the rest is C strftime.
  std::string format;
  const std::string& in = a.get(0).as_string();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 1 < in.size()) {
      char c = in[i + 1];
      if (c == 'f') {
        format += "000000";
        ++i;
        continue;
      }
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      format += in.substr(i, 2);
      ++i;
      continue;
    }
    format += in[i];
  }
  std::time_t now = interp.now();
  std::tm tm{};
  localtime_r(&now, &tm);
  for (std::size_t size = 256; size <= (1u << 16); size *= 4) {
    std::string out(size, '\0');
    std::size_t n = std::strftime(out.data(), out.size(), format.c_str(), &tm);
    if (n > 0 || format.empty()) {
      out.resize(n);
      return Value::string(std::move(out));
    }
  }
  return Value::string("");
}

}  // namespace

std::string Namespace::repr() const {
  std::string out = "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : attrs_.entries) {
    if (!first) out += ", ";
    first = false;
    out += k.repr() + ": " + v.repr();
  }
  return out + "}>";
}

Value Namespace::attribute(const std::string& name) const {
  if (const Value* found = attrs_.find(std::string_view(name))) return *found;
  return Value::undefined("'jinja2.utils.Namespace object' has no attribute '" + name + "'");
}

void add_builtin_globals(Scope& scope) {
  auto add = [&scope](const char* name, BuiltinFn fn) {
    scope.set(name, Value::object(std::make_shared<BuiltinFunction>(name, fn)));
  };
  add("range", builtin_range);
  add("dict", builtin_dict);
  add("namespace", builtin_namespace);
  add("joiner", builtin_joiner);
  add("cycler", builtin_cycler);
  add("raise_exception", builtin_raise_exception);
  add("strftime_now", builtin_strftime_now);
}

}  // namespace folio::jinja
