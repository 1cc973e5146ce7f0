// ToolCallParser: one choice's output read as it streams into content and
// OpenAI tool calls, in the tool-call format of the served family
// (tool_calls.h). Text that may still turn out to be part of a call is held
// back until it is known; a call that does not parse is given back as
// content, as it was written. Hermes calls stream their arguments as they
// come; the other formats give each call whole once its text is complete.
//
// Besides the format's own spelling, a fenced ```json block holding
// {"name": ..., "arguments": ...} (what small models such as
// Qwen2.5-Coder write when they leave their template's tags out) is a call
// when it names an offered tool and its arguments fit that tool's schema;
// any other fenced block stays content.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api/tool_call_text.h"
#include "server/api/tool_calls.h"

namespace folio::server {

class ToolCallParser {
 public:
  // tools: the request's tools (null: none known, and no fenced block is read).
  explicit ToolCallParser(ToolFormat format, const ToolRequest* tools = nullptr);

  std::vector<OutputEvent> feed(std::string_view text);
  // The output ended: what was held back.
  std::vector<OutputEvent> finish();
  int num_calls() const { return num_calls_; }

 private:
  // A span of output that opens with a tag and closes with another (or at
  // the output's end, `close` empty).
  struct Tag {
    std::string_view open, close;
    bool keep = false;  // the tags are part of the call's text (Qwen's <function=...>)
  };
  enum class Region { kNone, kCall, kHermes, kFence };
  enum class Guess { kYes, kNo, kMaybe };

  void run(std::vector<OutputEvent>& out, bool at_end);
  bool in_text(std::vector<OutputEvent>& out, bool at_end);
  bool in_call(std::vector<OutputEvent>& out, bool at_end);
  bool in_hermes(std::vector<OutputEvent>& out, bool at_end);
  bool in_fence(std::vector<OutputEvent>& out, bool at_end);
  void open_hermes_call(std::vector<OutputEvent>& out);
  void close_hermes_call(std::vector<OutputEvent>& out, std::string_view body);

  // Whether the output's start (white space left out) is a call written
  // with no tag before it: Mistral's [{...}], Llama's {...}, GLM's NAME\n{...}.
  Guess bare_start(std::string_view head) const;
  Guess fence_start(std::string_view body) const;
  std::optional<std::vector<ToolCallText>> read_region(std::string_view body) const;
  std::optional<std::vector<ToolCallText>> read_fence(std::string_view body) const;
  void content(std::vector<OutputEvent>& out, std::string_view text);
  void emit_call(std::vector<OutputEvent>& out, const ToolCallText& call);

  ToolFormat format_;
  ToolSignatures tools_;
  bool reads_fences_;
  std::vector<Tag> tags_;
  std::string pending_;     // text not yet given out
  std::string held_space_;  // white space after a call, given out only if text follows it
  bool at_start_ = true;  // nothing but white space has come yet
  Region region_ = Region::kNone;
  Tag tag_;                   // kCall: the tag that opened it
  std::size_t scanned_ = 0;   // in a region: pending_ holds no closing tag before this
  bool call_started_ = false;  // kHermes: its name is out; arguments stream
  std::size_t args_sent_ = 0;  // kHermes: bytes of arguments given out, from the start of pending_
  JsonStringState args_state_;  // kHermes: where the arguments given out end (inside a string?)
  int num_calls_ = 0;
};

}  // namespace folio::server
