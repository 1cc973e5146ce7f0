// Value: one Jinja value, modelled on the Python object jinja2 would hold
// (Undefined, None, bool, int, float, str, list/tuple, dict, host objects).
// Copies share containers as Python references do; no container changes once
// a template can see it, except a namespace's attributes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace folio::jinja {

class Interpreter;
class Value;
struct Sequence;
struct Mapping;
class Object;

// What kind of Python sequence a Sequence stands for: it decides repr(),
// len() and indexing (generators and dict views are not subscriptable,
// generators have no len() and iterate once, as in Python).
enum class SeqKind : std::uint8_t { kList, kTuple, kGenerator, kItemsView, kKeysView, kValuesView };

// Arguments of a call, as the template wrote them.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Value {
 public:
  enum class Kind : std::uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kSequence, kMapping, kObject,
  };

  Value() : data_(Undefined{}) {}
  // An undefined value; `hint` is the error to raise when it is used ("'x' is undefined").
  static Value undefined(std::string hint);
  static Value none() { return Value(None{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(std::int64_t i) { return Value(i); }
  static Value number(double d) { return Value(d); }
  // A str; `markup` marks markupsafe.Markup (from |safe or |escape).
  static Value string(std::string text, bool markup = false);
  static Value sequence(std::vector<Value> items, SeqKind kind = SeqKind::kList);
  static Value mapping(std::shared_ptr<Mapping> map);
  static Value object(std::shared_ptr<Object> obj) { return Value(std::move(obj)); }

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_sequence() const { return kind() == Kind::kSequence; }
  bool is_mapping() const { return kind() == Kind::kMapping; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // numbers.Number
  bool is_integral() const { return is_bool() || is_int(); }              // isinstance(x, int)

  bool as_bool() const { return std::get<bool>(data_); }
  std::int64_t as_int() const;  // bool or int
  double as_double() const;     // bool, int or float
  const std::string& as_string() const { return *std::get<Str>(data_).text; }
  bool is_markup() const { return is_string() && std::get<Str>(data_).markup; }
  Sequence& seq() const { return *std::get<std::shared_ptr<Sequence>>(data_); }
  Mapping& map() const { return *std::get<std::shared_ptr<Mapping>>(data_); }
  Object& obj() const { return *std::get<std::shared_ptr<Object>>(data_); }
  const std::shared_ptr<Object>& object_ptr() const { return std::get<std::shared_ptr<Object>>(data_); }
  const std::string& undefined_hint() const;

  // Python semantics of bool(x), str(x), repr(x) and type(x).__name__.
  bool truthy() const;
  std::string str() const;
  std::string repr() const;
  std::string type_name() const;

 private:
  struct Undefined {
    std::shared_ptr<const std::string> hint;
  };
  struct None {};
  struct Str {
    std::shared_ptr<const std::string> text;
    bool markup = false;
  };
  using Data = std::variant<Undefined, None, bool, std::int64_t, double, Str, std::shared_ptr<Sequence>,
                            std::shared_ptr<Mapping>, std::shared_ptr<Object>>;
  template <typename T>
  explicit Value(T data) : data_(std::move(data)) {}

  Data data_;
};

struct Sequence {
  std::vector<Value> items;
  SeqKind kind = SeqKind::kList;
  bool consumed = false;  // a generator that was iterated yields nothing more

  bool subscriptable() const { return kind == SeqKind::kList || kind == SeqKind::kTuple; }
  bool has_len() const { return kind != SeqKind::kGenerator; }
};

// A Python dict: insertion-ordered, keys compared with Python's ==.
struct Mapping {
  std::vector<std::pair<Value, Value>> entries;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Replaces the value of an equal key, or appends; unhashable keys are an error.
  void set(Value key, Value value);
};

// A host object the template can see: namespace, loop, macro, function, method.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  virtual std::string repr() const;
  // The attribute, or an Undefined (with a hint) when there is none.
  virtual Value attribute(const std::string& name) const;
  virtual bool callable() const { return false; }
  virtual Value call(Interpreter& interp, CallArgs& args) const;
  // Drops the references that can form a cycle (a macro's closure, a
  // namespace's attributes); the interpreter calls it when a render ends, so
  // that cycles a template built do not outlive the render.
  virtual void release() {}
};

// Python's ==, and the ordering operators (<, <=, >, >=) that raise on
// unorderable types as Python does.
bool py_equal(const Value& a, const Value& b);
bool py_compare(const Value& a, const Value& b, std::string_view op);

// Binds CallArgs to a Python-style signature (positional, then by name) and
// refuses what Python would: too many arguments, unknown or repeated names.
class BoundArgs {
 public:
  BoundArgs(std::string_view function, const CallArgs& args,
            std::initializer_list<std::string_view> params);
  bool has(std::size_t i) const { return bound_[i] != nullptr; }
  const Value& get(std::size_t i) const;  // an Undefined when not given
  Value get_or(std::size_t i, Value fallback) const { return has(i) ? *bound_[i] : fallback; }

 private:
  std::vector<const Value*> bound_;
};

// The error a use of an undefined value raises (its hint).
[[noreturn]] void fail_undefined(const Value& undefined);

}  // namespace folio::jinja
