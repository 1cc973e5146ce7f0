// Values and the Python semantics under them: float repr, str repr, str
// methods over UTF-8, json.dumps, == and ordering. Expected strings are
// what CPython 3.11 prints for the same operations.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "jinja/error.h"
#include "jinja/json.h"
#include "jinja/string.h"
#include "jinja/value.h"

namespace folio::jinja {
namespace {

using Strings = std::vector<std::string>;

TEST(JinjaValue, FloatReprIsCPythons) {
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"},
      {0.1, "0.1"},
      {1e16, "1e+16"},
      {1e-5, "1e-05"},
      {1e-4, "0.0001"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {1234567890123456.0, "1234567890123456.0"},
      {0.1 + 0.2, "0.30000000000000004"},
      {-0.0, "-0.0"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {100.0, "100.0"},
      {1e22, "1e+22"},
      {123.456, "123.456"},
      {1.0 / 3, "0.3333333333333333"},
      {std::numeric_limits<double>::infinity(), "inf"},
  };
  for (const auto& [value, text] : cases) EXPECT_EQ(py_float_repr(value), text) << text;
  EXPECT_EQ(py_float_repr(std::nan("")), "nan");
}

TEST(JinjaValue, StrReprQuotesAndEscapesAsCPython) {
  EXPECT_EQ(py_repr("a'b"), "\"a'b\"");
  EXPECT_EQ(py_repr("a\"b"), "'a\"b'");
  EXPECT_EQ(py_repr("a'\"b"), "'a\\'\"b'");
  EXPECT_EQ(py_repr(std::string("\0\t\x7f\u00a0\u2028é😀\\", 15)), "'\\x00\\t\\x7f\\xa0\\u2028é😀\\\\'");
}

TEST(JinjaValue, StrMethodsCountCodePointsAndUnicodeSpace) {
  EXPECT_EQ(py_split(" a  b ", std::nullopt, 1, false), (Strings{"a", "b "}));
  EXPECT_EQ(py_split(" a  b ", std::nullopt, 1, true), (Strings{" a", "b"}));
  EXPECT_EQ(py_split("a,b,,c", std::string(","), 2, false), (Strings{"a", "b", ",c"}));
  EXPECT_EQ(py_split("a,b,,c", std::string(","), 2, true), (Strings{"a,b", "", "c"}));
  EXPECT_EQ(py_strip("\u00a0 x \u3000", std::nullopt, true, true), "x");
  EXPECT_EQ(py_strip("xyhixy", std::string("yx"), true, true), "hi");
  EXPECT_EQ(py_splitlines("a\nb\r\nc\vd\u2028e", false), (Strings{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(py_splitlines("a\nb\n", true), (Strings{"a\n", "b\n"}));
  EXPECT_EQ(py_replace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(py_replace("ab", "", "-", -1), "-a-b-");
  EXPECT_EQ(py_find("héllo", "l", false), 2);
  EXPECT_EQ(utf8::length("héllo😀"), 6u);
  EXPECT_EQ(utf8::substr("héllo😀", 1, 3), "él");
}

TEST(JinjaValue, CaseMappingAsCPython) {
  EXPECT_EQ(py_title("hello_world 2nd ǆ"), "Hello_World 2Nd ǅ");
  EXPECT_EQ(py_upper("ßtraße"), "SSTRASSE");
  EXPECT_EQ(py_lower("İ"), "i\u0307");
  EXPECT_EQ(py_capitalize("ǆx"), "ǅx");
  EXPECT_EQ(py_lower("ÀÉÎ ΣΑ ЖЯ"), "àéî σα жя");
  EXPECT_EQ(jinja_title("hello wORLD-foo(bar [baz"), "Hello World-Foo(Bar [Baz");
  EXPECT_TRUE(py_islower("abc1"));
  EXPECT_FALSE(py_islower("ǅ"));
  EXPECT_FALSE(py_isupper("123"));
}

TEST(JinjaValue, TojsonIsJsonDumps) {
  Value v = value_from_json(nlohmann::ordered_json::parse(R"({"a": [1, {"b": []}], "c": "é\u2028\u0001", "d": {}})"));
  JsonDumpOptions plain;
  EXPECT_EQ(dump_json(v, plain), "{\"a\": [1, {\"b\": []}], \"c\": \"é\u2028\\u0001\", \"d\": {}}");
  JsonDumpOptions indented;
  indented.indent = "  ";
  indented.ensure_ascii = true;
  EXPECT_EQ(dump_json(v, indented),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    }\n  ],\n  \"c\": \"\\u00e9\\u2028\\u0001\",\n  \"d\": {}\n}");
  JsonDumpOptions compact;
  compact.item_separator = ",";
  compact.key_separator = ":";
  compact.sort_keys = true;
  Value w = value_from_json(nlohmann::ordered_json::parse(R"({"b": 1, "a": [1.5, null, true]})"));
  EXPECT_EQ(dump_json(w, compact), "{\"a\":[1.5,null,true],\"b\":1}");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(dump_json(Value::string("é😀\x7f"), ascii), "\"\\u00e9\\ud83d\\ude00\\u007f\"");
  EXPECT_EQ(dump_json(Value::number(1e20), plain), "1e+20");
  EXPECT_EQ(dump_json(Value::number(std::nan("")), plain), "NaN");
  EXPECT_THROW(dump_json(Value(), plain), JinjaError);
  EXPECT_THROW(dump_json(Value::sequence({}, SeqKind::kGenerator), plain), JinjaError);
}

TEST(JinjaValue, FromJsonKeepsKeyOrderAndNumberKinds) {
  Value v = value_from_json(nlohmann::ordered_json::parse(R"({"z": 1, "a": 1.0, "m": 18446744073709551615})"));
  ASSERT_TRUE(v.is_mapping());
  EXPECT_EQ(v.str(), "{'z': 1, 'a': 1.0, 'm': 1.8446744073709552e+19}");
}

TEST(JinjaValue, EqualityAndOrderingArePythons) {
  EXPECT_TRUE(py_equal(Value::integer(1), Value::number(1.0)));
  EXPECT_TRUE(py_equal(Value::integer(1), Value::boolean(true)));
  EXPECT_FALSE(py_equal(Value::none(), Value::boolean(false)));
  EXPECT_FALSE(py_equal(Value::sequence({Value::integer(1)}, SeqKind::kTuple), Value::sequence({Value::integer(1)})));
  EXPECT_TRUE(py_equal(Value(), Value()));  // Undefined == Undefined, as jinja2 has it
  auto map = [](const char* json) { return value_from_json(nlohmann::ordered_json::parse(json)); };
  EXPECT_TRUE(py_equal(map(R"({"a": 1, "b": [2]})"), map(R"({"b": [2.0], "a": 1})")));
  EXPECT_TRUE(py_compare(Value::string("ab"), Value::string("b"), "<"));
  EXPECT_TRUE(py_compare(map("[1, 2]"), map("[1, 3]"), "<"));
  EXPECT_TRUE(py_compare(map("[1, 2]"), map("[1, 2, 0]"), "<"));
  EXPECT_THROW(py_compare(Value::integer(1), Value::string("a"), "<"), JinjaError);
  EXPECT_THROW(py_compare(Value(), Value::integer(1), "<"), JinjaError);
}

TEST(JinjaValue, TruthinessAndStrAreJinja2s) {
  EXPECT_FALSE(Value().truthy());
  EXPECT_EQ(Value().str(), "");
  EXPECT_EQ(Value::none().str(), "None");
  EXPECT_EQ(Value::boolean(true).str(), "True");
  EXPECT_FALSE(Value::sequence({}).truthy());
  EXPECT_TRUE(Value::sequence({}, SeqKind::kGenerator).truthy());  // a generator object is true
  EXPECT_EQ(Value::sequence({Value::integer(1)}, SeqKind::kTuple).str(), "(1,)");
  EXPECT_EQ(Value::sequence({Value::sequence({Value::string("a"), Value::integer(1)}, SeqKind::kTuple)},
                            SeqKind::kItemsView)
                .str(),
            "dict_items([('a', 1)])");
  EXPECT_EQ(Value::string("<b>", true).repr(), "Markup('<b>')");
}

TEST(JinjaValue, UnhashableKeysAreRefused) {
  Mapping m;
  EXPECT_THROW(m.set(Value::sequence({}), Value::integer(1)), JinjaError);
  m.set(Value::integer(1), Value::string("a"));
  m.set(Value::boolean(true), Value::string("b"));  // True == 1: the same key, as in Python
  ASSERT_EQ(m.entries.size(), 1u);
  EXPECT_EQ(m.entries[0].second.as_string(), "b");
}

TEST(JinjaValue, BoundArgsRefuseWhatPythonRefuses) {
  CallArgs args;
  args.positional = {Value::integer(1)};
  args.keyword = {{"b", Value::integer(2)}};
  BoundArgs bound("f", args, {"a", "b", "c"});
  EXPECT_EQ(bound.get(0).as_int(), 1);
  EXPECT_EQ(bound.get(1).as_int(), 2);
  EXPECT_FALSE(bound.has(2));
  EXPECT_EQ(bound.get_or(2, Value::integer(9)).as_int(), 9);
  EXPECT_THROW(BoundArgs("f", args, {"a"}), JinjaError);       // b unknown
  EXPECT_THROW(BoundArgs("f", args, {"b", "a"}), JinjaError);  // b given twice
}

}  // namespace
}  // namespace folio::jinja
