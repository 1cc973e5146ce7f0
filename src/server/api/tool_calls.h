// Tool calling: a chat request's `tools`, `tool_choice` and
// `parallel_tool_calls` read and checked; the family's tool-call format told
// from its chat template's text; the constraint that makes a call well-formed
// (xgrammar structural tags: `required` and a named function force one,
// `auto` constrains a call from its opening tag on where the tag is text).
// The model's output is read back into OpenAI `tool_calls` by
// ToolCallParser (tool_call_parser.h); the conversation is shaped for the
// template by tool_conversation.h. A template that knows no tools gets them
// described in a system message and answers in the Hermes format (as
// llama-server's generic mode). gpt-oss's harmony messages are read by
// HarmonyParser (harmony_parser.h). docs/models.md has the table of families.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/constraint/constraint_compiler.h"
#include "server/api/json_fields.h"

namespace folio::server {

enum class ToolFormat {
  kHermes,       // <tool_call>{"name", "arguments"}</tool_call>: Qwen2.5/3, Hermes, Granite 4, SmolLM3
  kQwenXml,      // <tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>: Qwen3-Coder
  kMistral,      // [TOOL_CALLS][{"name", "arguments"}, ...]: Mistral 7B v0.3, Nemo, Ministral 8B
  kMistralArgs,  // [TOOL_CALLS]NAME[ARGS]{...}: Mistral-Small 3.2, Ministral 3, Devstral, Magistral
  kLlama3,       // {"name", "parameters"} (after <|python_tag|> or bare): Llama 3.1-3.3 and 4
  kPythonic,     // [name(key=value, ...), ...]: templates that ask for Python-style calls (Llama 3.2/4)
  kGranite,      // <|tool_call|>[{"name", "arguments"}, ...]: Granite 3.x
  kPhi4Mini,     // <|tool_call|>[...]<|/tool_call|>: Phi-4-mini (tools in the system message's `tools`)
  kGlm4,         // NAME\n{...}: GLM-4-0414 and GLM-4-9B-chat (results as `observation` turns)
  kGeneric,      // the template knows no tools: folio describes them, Hermes blocks back
  kHarmony,      // gpt-oss: messages to=functions.NAME, read by HarmonyParser (harmony_parser.h)
};

// What the template's own text says about its tool format.
ToolFormat tool_format_of(std::string_view template_source);
// The format's name as docs/models.md and folio's log say it.
const char* tool_format_name(ToolFormat format);
// Mistral's templates take only ids of 9 letters and digits.
inline bool mistral_ids(ToolFormat format) {
  return format == ToolFormat::kMistral || format == ToolFormat::kMistralArgs;
}

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

// Where the answer's thinking stands when a call is forced: the template
// does not think; the model may think (<think>...</think>) before the call;
// the prompt opened <think>, so the model ends its thinking first.
enum class Thinking { kNone, kMayOpen, kOpen };

// The constraint for the request's choice in `format`; nullopt for kNone,
// and for kHarmony (harmony_call_constraint, which names control tokens).
// A forced call comes after the thinking, which stays free text.
std::optional<ConstraintSpec> tool_constraint(const ToolRequest& tools, ToolFormat format,
                                              Thinking thinking = Thinking::kNone);

// A call's arguments in a structural tag: JSON that fits `schema`.
Json tool_arguments_format(const Json& schema);

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

// "call_..." ids, unique within a server run; for Mistral's formats, 9
// letters and digits (what its templates take back).
std::string new_tool_call_id(ToolFormat format = ToolFormat::kHermes);

}  // namespace folio::server
