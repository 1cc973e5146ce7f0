// jinja2's tests over Values.
#include "jinja/tests.h"

#include <cstdint>
#include <map>

#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/operators.h"
#include "jinja/string.h"

namespace folio::jinja {

namespace {

const Value& operand(std::string_view test, const CallArgs& args) {
  if (args.positional.size() + args.keyword.size() != 1) {
    runtime_fail("test '" + std::string(test) + "' takes exactly one argument");
  }
  return args.positional.empty() ? args.keyword[0].second : args.positional[0];
}

void no_args(std::string_view test, const CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    runtime_fail("test '" + std::string(test) + "' takes no arguments");
  }
}

bool remainder_is(const Value& v, const Value& divisor, std::int64_t want) {
  Value r = py_binary("%", v, divisor, SIZE_MAX);
  return py_equal(r, Value::integer(want));
}

#define NO_ARG_TEST(fn_name, test_name, expr)                         \
  bool fn_name(Interpreter&, const Value& v, const CallArgs& args) {  \
    no_args(test_name, args);                                         \
    return (expr);                                                    \
  }

NO_ARG_TEST(test_defined, "defined", !v.is_undefined())
NO_ARG_TEST(test_undefined, "undefined", v.is_undefined())
NO_ARG_TEST(test_none, "none", v.is_none())
NO_ARG_TEST(test_boolean, "boolean", v.is_bool())
NO_ARG_TEST(test_false, "false", v.is_bool() && !v.as_bool())
NO_ARG_TEST(test_true, "true", v.is_bool() && v.as_bool())
NO_ARG_TEST(test_integer, "integer", v.is_int())
NO_ARG_TEST(test_float, "float", v.is_float())
NO_ARG_TEST(test_number, "number", v.is_number())
NO_ARG_TEST(test_string, "string", v.is_string())
NO_ARG_TEST(test_mapping, "mapping", v.is_mapping())
NO_ARG_TEST(test_escaped, "escaped", v.is_markup())
NO_ARG_TEST(test_lower, "lower", py_islower(v.str()))
NO_ARG_TEST(test_upper, "upper", py_isupper(v.str()))

// len() and __getitem__ both exist: str, list, tuple, dict, and Undefined.
NO_ARG_TEST(test_sequence, "sequence",
            v.is_undefined() || v.is_string() || v.is_mapping() ||
                (v.is_sequence() && v.seq().subscriptable()))
// iter() works: Undefined too.
NO_ARG_TEST(test_iterable, "iterable",
            v.is_undefined() || v.is_string() || v.is_sequence() || v.is_mapping())
// Undefined has __call__ (it raises), so Python calls it callable.
NO_ARG_TEST(test_callable, "callable", v.is_undefined() || (v.is_object() && v.obj().callable()))

bool test_odd(Interpreter&, const Value& v, const CallArgs& args) {
  no_args("odd", args);
  return remainder_is(v, Value::integer(2), 1);
}

bool test_even(Interpreter&, const Value& v, const CallArgs& args) {
  no_args("even", args);
  return remainder_is(v, Value::integer(2), 0);
}

bool test_divisibleby(Interpreter&, const Value& v, const CallArgs& args) {
  return remainder_is(v, operand("divisibleby", args), 0);
}

bool test_in(Interpreter&, const Value& v, const CallArgs& args) {
  return py_contains(operand("in", args), v);
}

bool test_eq(Interpreter&, const Value& v, const CallArgs& args) { return py_equal(v, operand("==", args)); }
bool test_ne(Interpreter&, const Value& v, const CallArgs& args) { return !py_equal(v, operand("!=", args)); }
bool test_lt(Interpreter&, const Value& v, const CallArgs& args) { return py_compare(v, operand("<", args), "<"); }
bool test_le(Interpreter&, const Value& v, const CallArgs& args) { return py_compare(v, operand("<=", args), "<="); }
bool test_gt(Interpreter&, const Value& v, const CallArgs& args) { return py_compare(v, operand(">", args), ">"); }
bool test_ge(Interpreter&, const Value& v, const CallArgs& args) { return py_compare(v, operand(">=", args), ">="); }

bool test_sameas(Interpreter&, const Value& v, const CallArgs& args) {
  const Value& other = operand("sameas", args);
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kSequence: return &v.seq() == &other.seq();
    case Value::Kind::kMapping: return &v.map() == &other.map();
    case Value::Kind::kObject: return v.object_ptr() == other.object_ptr();
    case Value::Kind::kString: return false;  // distinct str objects, as Python usually has
    default: return py_equal(v, other);
  }
}

bool test_filter(Interpreter&, const Value& v, const CallArgs& args) {
  no_args("filter", args);
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

bool test_test(Interpreter&, const Value& v, const CallArgs& args) {
  no_args("test", args);
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::map<std::string_view, TestFn> kTests = {
      {"odd", test_odd},           {"even", test_even},         {"divisibleby", test_divisibleby},
      {"defined", test_defined},   {"undefined", test_undefined}, {"filter", test_filter},
      {"test", test_test},         {"none", test_none},         {"boolean", test_boolean},
      {"false", test_false},       {"true", test_true},         {"integer", test_integer},
      {"float", test_float},       {"lower", test_lower},       {"upper", test_upper},
      {"string", test_string},     {"mapping", test_mapping},   {"number", test_number},
      {"sequence", test_sequence}, {"iterable", test_iterable}, {"callable", test_callable},
      {"sameas", test_sameas},     {"escaped", test_escaped},   {"in", test_in},
      {"==", test_eq},             {"eq", test_eq},             {"equalto", test_eq},
      {"!=", test_ne},             {"ne", test_ne},             {">", test_gt},
      {"gt", test_gt},             {"greaterthan", test_gt},    {">=", test_ge},
      {"ge", test_ge},             {"<", test_lt},              {"lt", test_lt},
      {"lessthan", test_lt},       {"<=", test_le},             {"le", test_le},
  };
  auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

}  // namespace folio::jinja
