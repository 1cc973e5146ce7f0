// A conversation with tools, shaped the way the served family's template
// reads it: the tools where the template looks for them, earlier calls and
// their results in the roles and fields it prints. OpenAI's shape (assistant
// tool_calls, `tool` messages, `tools`) is what every client sends; each
// family's template takes a different one:
//   generic     (no tools in the template) tools described in the system
//               message, calls written into the assistant's text, results as
//               user text, all in the Hermes form;
//   Phi-4-mini  tools as JSON text in the system message's own `tools` field;
//   SmolLM3     tools also as `xml_tools`;
//   GLM-4-0414  each call an assistant turn whose `metadata` is the name and
//               whose content is the arguments, results as `observation`;
//   Mistral     call ids of exactly 9 letters and digits (other ids mapped to
//               such ones, the same way in a call and in its result);
//   a template that prints no tool_calls (Granite 3.x) gets the calls written
//   into the assistant's text in the family's own form.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/chat_prompt.h"
#include "server/api/tool_calls.h"

namespace folio::server {

// Shapes `messages` and sets the template variables that carry the tools
// (options.tools, and options.extra where the template reads another name).
void shape_tool_conversation(ToolFormat format, std::string_view template_source,
                             const std::optional<ToolRequest>& tools, std::vector<ChatMessage>& messages,
                             ChatRenderOptions& options);

// Calls (OpenAI's tool_calls, arguments as objects) as the family writes them
// in its own answers.
std::string tool_calls_as_text(ToolFormat format, const Json& calls);

}  // namespace folio::server
