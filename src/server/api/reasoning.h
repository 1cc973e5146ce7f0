// Reasoning: the thinking a model writes between <think> and </think>
// (Qwen3, DeepSeek-R1 and its distills, QwQ), told apart from its answer as
// the output streams, for `reasoning_content` beside `content`. A template
// that opens the tag itself at the end of the prompt (DeepSeek-R1's) starts
// the output inside the thinking.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace folio::server {

// Whether a template's text thinks in <think> tags (the parser's default).
bool template_thinks(std::string_view template_source);
// Whether a prompt's text ends inside an open <think> (its last tag opens).
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
  bool after_close_ = false;  // white space right after </think> is dropped
  std::string pending_;
};

}  // namespace folio::server
