// Request JSON, parsed once into one ordered type: each object keeps its keys
// in the order the client wrote them (a chat template prints tool definitions
// as written; a schema's properties are generated in its order), and responses
// keep theirs in the order built. Typed reads of request fields: each returns
// nullopt when the field is absent or null (OpenAI treats null as "not given")
// and throws ApiError 400 naming the field when its type or range is wrong.
// Unknown fields are never read, so they are ignored, as OpenAI ignores them.
//
// Parsing is linear in the body's size however many keys an object has (an
// insertion-ordered object would check each key against all before it), and
// a lookup is linear in its object's keys: readers look up a fixed number of
// names per object, so reading a request stays linear too.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace folio::server {

using Json = nlohmann::ordered_json;

// The body of a POST as a JSON object; 400 when it is not JSON (a number
// beyond a double, like 1e999, included), repeats a key within one object
// (which of the two was meant cannot be known), nests deeper than
// kMaxJsonDepth, holds more than kMaxJsonValues values, or is not an object.
Json parse_json_object(std::string_view body);
inline constexpr int kMaxJsonDepth = 64;
inline constexpr std::int64_t kMaxJsonValues = 1 << 20;

// JSON text (a tool call's arguments) as a value; nullopt when it is not
// valid JSON, repeats a key in one object or nests deeper than kMaxJsonDepth.
std::optional<Json> parse_json(std::string_view text);

// JSON text as the server sends it: compact, invalid UTF-8 replaced (U+FFFD)
// rather than thrown.
inline std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// An integer field's value, whatever its JSON number type; nullopt when it is
// not an integer or lies beyond int64 (2^64-1 is not -1).
std::optional<std::int64_t> as_int64(const Json& v);

// A field of an object; nullptr when it is absent or null (not given).
const Json* field_of(const Json& object, const char* name);

std::optional<std::int64_t> get_int(const Json& body, const char* name, std::int64_t min, std::int64_t max);
std::optional<double> get_number(const Json& body, const char* name);
std::optional<bool> get_bool(const Json& body, const char* name);
std::optional<std::string> get_string(const Json& body, const char* name);
// An object or array field; nullptr when absent or null.
const Json* get_object(const Json& body, const char* name);
const Json* get_array(const Json& body, const char* name);

// A field's value for messages: strings as they are, others as JSON.
std::string describe(const Json& value);

}  // namespace folio::server
