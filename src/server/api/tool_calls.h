// Tool calling: a chat request's `tools`, `tool_choice` and
// `parallel_tool_calls` read and checked; the constraint that makes a call
// well-formed (xgrammar structural tags: `required` and a named function
// force one, `auto` constrains a call from its opening tag on); and the
// model's output read back into OpenAI `tool_calls`, as it streams.
//
// The output formats are those of the families folio serves, told apart by
// the chat template: Hermes-style `<tool_call>{"name": ..., "arguments":
// ...}</tool_call>` blocks (Qwen2.5, Qwen3, Hermes), Mistral's
// `[TOOL_CALLS][{...}]`, Llama 3.x's bare `{"name": ..., "parameters":
// ...}` and gpt-oss's harmony messages (harmony_parser.h). A template that knows no tools gets them described in a system
// message and answers in the Hermes format (as llama-server's generic mode).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/constraint/constraint_compiler.h"
#include "server/api/json_fields.h"

namespace folio::server {

enum class ToolFormat {
  kHermes,   // the template prints <tool_call> blocks itself
  kMistral,  // [TOOL_CALLS] then a JSON array of calls
  kLlama3,   // one JSON object per call, "parameters" for arguments
  kGeneric,  // the template knows no tools: folio describes them, Hermes blocks back
  kHarmony,  // gpt-oss: messages to=functions.NAME, read by HarmonyParser (harmony_parser.h)
};

// What the template's own text says about its tool format.
ToolFormat tool_format_of(std::string_view template_source);

struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kFunction };
  Json definitions = Json::array();  // the request's tools, as written
  std::vector<std::string> names;                    // [num_tools]
  std::vector<Json> parameters;              // [num_tools] JSON schemas ({"type": "object"} when absent)
  Choice choice = Choice::kAuto;
  std::string function;  // kFunction: its name
  bool parallel = true;  // parallel_tool_calls: more than one call in an answer

  // Whether the output is read for calls.
  bool parses_output() const { return choice != Choice::kNone; }
};

// nullopt when the request has no tools (absent, null or empty); a
// tool_choice other than "none"/"auto" without tools is a 400. Tools and
// tool_choice in OpenAI's chat shapes; `body`: a chat request's tools,
// tool_choice and parallel_tool_calls.
std::optional<ToolRequest> read_tools(const Json* tools, const Json* tool_choice, std::optional<bool> parallel);
std::optional<ToolRequest> read_tools(const Json& body);

// The constraint for the request's choice in `format`; nullopt for kNone,
// and for kHarmony (its calls are not constrained yet).
std::optional<ConstraintSpec> tool_constraint(const ToolRequest& tools, ToolFormat format);

// The system text that describes `tools` to a model whose template knows none.
std::string generic_tools_prompt(const ToolRequest& tools);

// One piece of a choice's output: text for `content`, the start of call
// `index` (its id and name), a fragment of its arguments (JSON text), or
// (from the reasoning parser) text for `reasoning_content`.
struct OutputEvent {
  enum class Kind { kContent, kCallStart, kArguments, kReasoning };
  Kind kind = Kind::kContent;
  int index = 0;
  std::string text;  // content, the function's name, or an arguments fragment
  std::string id;    // kCallStart
};

// Reads one choice's output as it streams. Text that may still turn out to
// be part of a call is held back until it is known; a call that does not
// parse is given back as content, as it was written.
class ToolCallParser {
 public:
  explicit ToolCallParser(ToolFormat format);

  std::vector<OutputEvent> feed(std::string_view text);
  // The output ended: what was held back.
  std::vector<OutputEvent> finish();
  int num_calls() const { return num_calls_; }

 private:
  void feed_hermes(std::vector<OutputEvent>& out, bool at_end);
  void open_call_hermes(std::vector<OutputEvent>& out);
  void close_call_hermes(std::vector<OutputEvent>& out, std::string_view body, bool streamed_start);
  void feed_whole(std::vector<OutputEvent>& out, bool at_end);
  void emit_call(std::vector<OutputEvent>& out, const std::string& name, const std::string& arguments);

  ToolFormat format_;
  std::string pending_;        // text not yet given out
  bool in_call_ = false;       // Hermes: inside <tool_call>
  bool call_started_ = false;  // Hermes: its name is out; arguments stream
  std::size_t args_sent_ = 0;  // Hermes: bytes of arguments given out, from the start of pending_
  bool whole_ = false;         // Mistral / Llama 3: the output is calls; read it at the end
  bool decided_ = false;       // Mistral / Llama 3: whether the output starts as calls is known
  int num_calls_ = 0;
};

// "call_..." ids, unique within a server run.
std::string new_tool_call_id();

}  // namespace folio::server
