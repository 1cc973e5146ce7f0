// fits_schema against the keywords tool parameters use: each keyword's pass
// and fail, combinations, local references, and keywords it cannot check
// letting a value through rather than refusing it.
#include "server/api/json_schema_check.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace folio::server {
namespace {

TEST(JsonSchemaCheckTest, EachKeywordPassesAndFails) {
  // schema, value, fits
  const std::vector<std::tuple<std::string, std::string, bool>> cases = {
      {R"({"type": "string"})", R"("x")", true},
      {R"({"type": "string"})", "1", false},
      {R"({"type": "integer"})", "3", true},
      {R"({"type": "integer"})", "3.0", true},
      {R"({"type": "integer"})", "3.5", false},
      {R"({"type": "number"})", "3.5", true},
      {R"({"type": "boolean"})", "true", true},
      {R"({"type": "boolean"})", "0", false},
      {R"({"type": "null"})", "null", true},
      {R"({"type": ["string", "null"]})", "null", true},
      {R"({"type": ["string", "null"]})", "2", false},
      {R"({"enum": ["a", 1]})", "1.0", true},
      {R"({"enum": ["a", 1]})", R"("b")", false},
      {R"({"const": {"k": [1]}})", R"({"k": [1]})", true},
      {R"({"const": {"k": [1]}})", R"({"k": [2]})", false},
      {R"({"minimum": 1, "maximum": 7})", "7", true},
      {R"({"minimum": 1, "maximum": 7})", "8", false},
      {R"({"exclusiveMinimum": 0})", "0", false},
      {R"({"exclusiveMaximum": 1})", "0.5", true},
      {R"({"multipleOf": 0.5})", "2.5", true},
      {R"({"multipleOf": 3})", "4", false},
      {R"({"minLength": 2, "maxLength": 3})", R"("ab")", true},
      {R"({"maxLength": 3})", R"("äöü")", true},  // code points, not bytes
      {R"({"maxLength": 3})", R"("abcd")", false},
      {R"({"items": {"type": "integer"}, "minItems": 1, "maxItems": 2})", "[1, 2]", true},
      {R"({"items": {"type": "integer"}})", R"([1, "2"])", false},
      {R"({"maxItems": 1})", "[1, 2]", false},
      {R"({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}})", R"(["a", 1, 2])", true},
      {R"({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}})", R"(["a", "b"])", false},
      {R"({"uniqueItems": true})", "[1, 2, 1.0]", false},
      {R"({"required": ["a"], "properties": {"a": {"type": "string"}}})", R"({"a": "x", "b": 1})", true},
      {R"({"required": ["a"]})", R"({"b": 1})", false},
      {R"({"properties": {"a": {"type": "string"}}, "additionalProperties": false})", R"({"a": "x", "b": 1})", false},
      {R"({"properties": {}, "additionalProperties": {"type": "integer"}})", R"({"b": 1})", true},
      {R"({"properties": {}, "additionalProperties": {"type": "integer"}})", R"({"b": "1"})", false},
      {R"({"minProperties": 1})", "{}", false},
      {R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})", "1", true},
      {R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})", "true", false},
      {R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})", "1", false},  // both match
      {R"({"allOf": [{"minimum": 1}, {"maximum": 2}]})", "3", false},
      {R"({"not": {"type": "string"}})", R"("x")", false},
      {R"({"$defs": {"pos": {"minimum": 0}}, "properties": {"n": {"$ref": "#/$defs/pos"}}})", R"({"n": -1})", false},
      {R"({"$defs": {"pos": {"minimum": 0}}, "properties": {"n": {"$ref": "#/$defs/pos"}}})", R"({"n": 1})", true},
      {R"({"properties": {"n": {"$ref": "#/nowhere"}}})", R"({"n": 1})", false},
      {R"({"pattern": "^[a-z]+$", "format": "email"})", R"("NOT AN EMAIL")", true},  // unchecked here
      {R"({"x-unknown": 1})", "1", true},
      {"true", "1", true},
      {"false", "1", false},
  };
  for (const auto& [schema, value, fits] : cases)
    EXPECT_EQ(fits_schema(parse_json(value).value(), parse_json(schema).value()), fits) << schema << " " << value;
}

TEST(JsonSchemaCheckTest, ASchemaThatRefersToItselfEnds) {
  const Json schema = parse_json(R"({"properties": {"next": {"$ref": "#"}}, "required": ["v"]})").value();
  EXPECT_TRUE(fits_schema(parse_json(R"({"v": 1, "next": {"v": 2}})").value(), schema));
  EXPECT_FALSE(fits_schema(parse_json(R"({"v": 1, "next": {"w": 2}})").value(), schema));
  const Json loop = parse_json(R"({"$ref": "#"})").value();
  EXPECT_FALSE(fits_schema(Json(1), loop));  // a reference that never ends fits nothing
}

}  // namespace
}  // namespace folio::server
