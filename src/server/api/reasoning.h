// Reasoning: the thinking a model writes between <think> and </think>
// (Qwen3, DeepSeek-R1 and its distills, QwQ, SmolLM3, GLM-Z1, Granite 3.3,
// Phi-4 reasoning) or between [THINK] and [/THINK] (Magistral, Ministral 3
// reasoning), told apart from its answer as the output streams, for
// `reasoning_content` beside `content`. A template that opens the tag itself
// at the end of the prompt (DeepSeek-R1's, GLM-Z1's) starts the output inside
// the thinking. Granite 3.3 wraps the answer after its thought in
// <response></response>; the wrapper is not part of the answer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace folio::server {

// Whether a template's text thinks in <think> or [THINK] tags (the parser's default).
bool template_thinks(std::string_view template_source);
// Whether a template thinks in Mistral's [THINK] tags, control tokens the
// output must be read with.
bool template_thinks_in_control_tokens(std::string_view template_source);
// Whether a prompt's text ends inside an open <think> or [THINK] (its last tag opens).
bool prompt_opens_thinking(std::string_view prompt_text);

class ReasoningParser {
 public:
  struct Piece {
    bool reasoning = false;
    std::string text;
  };

  explicit ReasoningParser(bool starts_inside);

  std::vector<Piece> feed(std::string_view text);
  std::vector<Piece> finish();  // the output ended: what was held back

 private:
  void run(std::vector<Piece>& out, bool at_end);
  static void add(std::vector<Piece>& out, bool reasoning, std::string_view text);

  enum class State { kStart, kThinking, kAnswer };
  State state_;
  int tags_ = -1;              // which pair opened the thinking (-1: not known, when it started inside)
  bool after_close_ = false;   // right after the thought: white space dropped, a <response> wrapper looked for
  bool wrapped_ = false;       // the answer opened with <response>: its closing tag is held back
  std::string pending_;
};

}  // namespace folio::server
