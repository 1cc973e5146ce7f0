#include "server/api/reasoning.h"

#include "server/api/stream_text.h"

namespace folio::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

bool template_thinks(std::string_view source) {
  return source.find(kOpen) != std::string_view::npos && source.find(kClose) != std::string_view::npos;
}

bool prompt_opens_thinking(std::string_view prompt) {
  const std::size_t open = prompt.rfind(kOpen);
  return open != std::string_view::npos && prompt.find(kClose, open) == std::string_view::npos;
}

ReasoningParser::ReasoningParser(bool starts_inside) : state_(starts_inside ? State::kThinking : State::kStart) {}

void ReasoningParser::add(std::vector<Piece>& out, bool reasoning, std::string_view text) {
  if (text.empty()) return;
  if (!out.empty() && out.back().reasoning == reasoning) {
    out.back().text += text;
  } else {
    out.push_back({reasoning, std::string(text)});
  }
}

std::vector<ReasoningParser::Piece> ReasoningParser::feed(std::string_view text) {
  pending_ += text;
  std::vector<Piece> out;
  run(out, false);
  return out;
}

std::vector<ReasoningParser::Piece> ReasoningParser::finish() {
  std::vector<Piece> out;
  run(out, true);
  return out;
}

void ReasoningParser::run(std::vector<Piece>& out, bool at_end) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        // Leading white space, then <think> or the answer.
        std::size_t i = 0;
        while (i < pending_.size() && is_json_space(pending_[i])) ++i;
        const std::string_view head = std::string_view(pending_).substr(i);
        if (head.substr(0, kOpen.size()) == kOpen) {
          pending_.erase(0, i + kOpen.size());
          state_ = State::kThinking;
          continue;
        }
        if (!at_end && (head.empty() || kOpen.substr(0, head.size()) == head)) return;  // not known yet
        state_ = State::kAnswer;
        continue;
      }
      case State::kThinking: {
        const std::size_t close = pending_.find(kClose);
        if (close == std::string::npos) {
          const std::size_t hold = at_end ? 0 : partial_tag(pending_, kClose);
          add(out, true, std::string_view(pending_).substr(0, pending_.size() - hold));
          pending_.erase(0, pending_.size() - hold);
          return;
        }
        add(out, true, std::string_view(pending_).substr(0, close));
        pending_.erase(0, close + kClose.size());
        state_ = State::kAnswer;
        after_close_ = true;
        continue;
      }
      case State::kAnswer:
        if (after_close_) {
          std::size_t i = 0;
          while (i < pending_.size() && is_json_space(pending_[i])) ++i;
          pending_.erase(0, i);
          if (pending_.empty() && !at_end) return;
          after_close_ = false;
        }
        add(out, false, pending_);
        pending_.clear();
        return;
    }
  }
}

}  // namespace folio::server
