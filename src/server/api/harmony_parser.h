// HarmonyParser: gpt-oss's output in the harmony format read into reasoning,
// content and tool calls as it streams, with no markup left in any of them.
// A message is a header, <|message|>, its text, then <|end|> (another
// message follows after <|start|>), or the end of the output (<|return|> and
// <|call|> end the generation and are not in its text). The header names the
// channel (<|channel|>analysis, commentary or final) and, for a tool call,
// the recipient (to=functions.NAME, before or after the channel) and the
// arguments' type (<|constrain|>json, or a bare word). analysis is reasoning,
// final is content, a message to a recipient is a call (functions.NAME is
// named NAME; a built-in tool keeps its full name) with its text as the
// arguments, and commentary to no one (a preamble) is content. The job
// renders control tokens as their text so that they can be read here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/api/tool_calls.h"

namespace folio::server {

class HarmonyParser {
 public:
  std::vector<OutputEvent> feed(std::string_view text);
  // The output ended: what was held back.
  std::vector<OutputEvent> finish();
  int num_calls() const { return num_calls_; }

 private:
  enum class State { kHeader, kBody };
  enum class Target { kReasoning, kContent, kCall };

  void run(std::vector<OutputEvent>& out, bool at_end);
  void open_message(std::vector<OutputEvent>& out, std::string_view header);
  void close_message(std::vector<OutputEvent>& out);
  void emit(std::vector<OutputEvent>& out, std::string_view text);

  State state_ = State::kHeader;
  Target target_ = Target::kContent;
  bool any_message_ = false;  // a header was read: text before any is not the format's
  int call_index_ = 0;
  bool call_has_arguments_ = false;
  int num_calls_ = 0;
  std::string pending_;
};

// Whether a chat template writes the harmony format (gpt-oss's).
bool template_is_harmony(std::string_view template_source);

}  // namespace folio::server
