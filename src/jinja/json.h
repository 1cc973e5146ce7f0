// JSON <-> Value: request data (messages, tools) comes in as JSON objects in
// key order, and |tojson writes values back as Python's json.dumps does.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "jinja/value.h"

namespace folio::jinja {

// JSON -> Value: objects become dicts in key order, arrays lists, integers
// int (unsigned ones past int64 become float), other numbers float.
Value value_from_json(const nlohmann::ordered_json& json);

// The options of json.dumps that chat templates pass to |tojson.
struct JsonDumpOptions {
  std::optional<std::string> indent;         // unset: one line
  std::optional<std::string> item_separator;  // unset: ", " on one line, "," with indent
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// json.dumps(value, ...): the same bytes for the same value. Values JSON has
// no form for (Undefined, generators, objects) are an error, as in Python.
std::string dump_json(const Value& value, const JsonDumpOptions& options);

}  // namespace folio::jinja
