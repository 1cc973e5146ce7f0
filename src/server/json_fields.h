// Typed reads of request fields: each returns nullopt when the field is absent
// or null (OpenAI treats null as "not given") and throws ApiError 400 naming
// the field when its type or range is wrong. Unknown fields are never read,
// so they are ignored, as OpenAI ignores them.
//
// Requests are parsed into nlohmann's sorted json (a map per object: a lookup
// costs log n however many keys a hostile body carries); the responses we
// build keep their fields in the order written (ResponseJson), which is
// linear per lookup but only ever holds a handful of keys.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace folio::server {

using Json = nlohmann::json;
using ResponseJson = nlohmann::ordered_json;

// The body of a POST as a JSON object; 400 when it is not JSON (a number
// beyond a double, like 1e999, included), nests deeper than kMaxJsonDepth, holds
// more than kMaxJsonValues values, or is not an object.
Json parse_json_object(std::string_view body);
inline constexpr int kMaxJsonDepth = 64;
inline constexpr std::int64_t kMaxJsonValues = 1 << 20;

// The fields of a body whose key order carries meaning, in the order the
// client wrote them: tool definitions (a chat template prints them as JSON)
// and JSON schemas (a schema's properties are generated in its order).
// `body` is the text parse_json_object accepted, `parsed` its tree; the
// result is an object with those of kOrderedFields that `body` has (an empty
// object when none). Built in linear time; a duplicate key inside one of them
// is a 400 (which of the two was meant cannot be known).
// ("text": the Responses API's text.format.schema.)
inline constexpr const char* kOrderedFields[] = {"tools",       "response_format", "structured_outputs",
                                                 "guided_json", "json_schema",     "text"};
ResponseJson ordered_fields(std::string_view body, const Json& parsed);
// JSON text (a tool call's arguments) in its written order; nullopt when it
// is not valid JSON or repeats a key in one object.
std::optional<ResponseJson> parse_ordered(std::string_view text);
// The value at a path of keys in an ordered tree; nullptr when absent or null.
const ResponseJson* ordered_at(const ResponseJson& tree, std::initializer_list<const char*> path);

// JSON text as the server sends it: compact, invalid UTF-8 replaced (U+FFFD)
// rather than thrown.
template <class J>
std::string dump_json(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

// An integer field's value, whatever its JSON number type; nullopt when it is
// not an integer or lies beyond int64 (2^64-1 is not -1).
std::optional<std::int64_t> as_int64(const Json& v);

// A field of an object; nullptr when it is absent or null (not given).
const Json* field_of(const Json& object, const char* name);

std::optional<std::int64_t> get_int(const Json& body, const char* name, std::int64_t min, std::int64_t max);
std::optional<double> get_number(const Json& body, const char* name);
std::optional<bool> get_bool(const Json& body, const char* name);
std::optional<std::string> get_string(const Json& body, const char* name);
// An object field (stream_options, logit_bias); nullptr when absent or null.
const Json* get_object(const Json& body, const char* name);

// A field's value for messages: strings as they are, others as JSON.
std::string describe(const Json& value);

}  // namespace folio::server
