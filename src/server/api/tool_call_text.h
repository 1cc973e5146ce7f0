// The text of tool calls, read in each family's spelling: JSON objects and
// arrays (Hermes, Mistral, Llama 3, Granite, Phi-4-mini), Mistral's
// `NAME[ARGS]{...}`, Python-style call lists (`[f(a=1), g(b="x")]`),
// Qwen3-Coder's XML (`<function=NAME><parameter=P>value</parameter>`) and
// GLM-4's `NAME\n{...}`. Each reader takes the whole text of a call region and
// gives its calls, or nothing when that text is not calls in its form; none
// guesses at a call from part of the text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/json_fields.h"

namespace folio::server {

struct ToolRequest;

// One call as the model wrote it: the function's name, its arguments as JSON
// text (an object's text; a string's content when the model wrote them as a
// string), and the id it gave the call ("" when none).
struct ToolCallText {
  std::string name;
  std::string arguments;
  std::string id;
};

// The offered tools a reader checks names against and types values by.
// Empty: any well-formed name is taken.
class ToolSignatures {
 public:
  ToolSignatures() = default;
  explicit ToolSignatures(const ToolRequest& tools);

  bool empty() const { return names_.empty(); }
  bool offers(std::string_view name) const { return parameters_of(name) != nullptr; }
  // The JSON schema of a tool's parameters; nullptr when it is not offered.
  const Json* parameters_of(std::string_view name) const;
  // A name a call may have: an offered tool's, or (no tools known) any
  // well-formed one.
  bool may_call(std::string_view name) const;
  // Whether some offered name (or, no tools known, some name) starts with `text`.
  bool may_start(std::string_view text) const;

 private:
  std::vector<std::string> names_;  // [num_tools]
  std::vector<Json> parameters_;    // [num_tools]
};

// OpenAI's rule for function names: 1 to 64 of [A-Za-z0-9_.-].
bool valid_tool_name(std::string_view name);

// The end of the JSON object or array that starts at `from` (after white
// space); npos when none starts there or it does not end in `text`.
std::size_t json_container_end(std::string_view text, std::size_t from);

// JSON text with the control characters inside its strings escaped (\t, \u0001):
// a grammar for a string of bounded length lets a raw tab through, which
// strict JSON readers (Python's json.loads) refuse. `state` carries where a
// stream cut the text: inside a string, after its backslash.
struct JsonStringState {
  bool in_string = false;
  bool escaped = false;
};
std::string escape_string_controls(std::string_view text, JsonStringState& state);

// {"name", "arguments"|"parameters"} (or OpenAI's {"type": "function",
// "function": {...}}) as a call.
std::optional<ToolCallText> call_of_json(const Json& v);

// One JSON array of calls, or calls as JSON objects one after another
// (separated by white space, ',' or ';').
std::optional<std::vector<ToolCallText>> read_json_calls(std::string_view text);

// `[name(key=value, ...), ...]` with Python literals for values (strings,
// numbers, True/False/None, lists, tuples, dicts).
std::optional<std::vector<ToolCallText>> read_pythonic_calls(std::string_view text);

// `<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>` blocks,
// each maybe inside <tool_call></tool_call>. A value is text; it becomes the
// JSON its parameter's schema types it as (a number, an object...) when it
// parses as that, and stays a string otherwise.
std::optional<std::vector<ToolCallText>> read_qwen_xml_calls(std::string_view text, const ToolSignatures& tools);

// Mistral's calls after [TOOL_CALLS]: a JSON array (or objects), or
// `NAME[ARGS]{...}` / `NAME[CALL_ID]ID[ARGS]{...}`, calls separated by
// [TOOL_CALLS].
std::optional<std::vector<ToolCallText>> read_mistral_calls(std::string_view text);

// A JSON value as the Python literal a model writes for it (True, None, ...).
std::string python_literal(const Json& v);

// GLM-4's `NAME\n{...}` calls, one after another (white space or
// <|assistant|> between them); NAME must be one the tools allow.
std::optional<std::vector<ToolCallText>> read_glm_calls(std::string_view text, const ToolSignatures& tools);

}  // namespace folio::server
