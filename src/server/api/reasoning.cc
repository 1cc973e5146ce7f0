#include "server/api/reasoning.h"

#include "server/api/stream_text.h"

namespace folio::server {
namespace {

struct Tags {
  std::string_view open, close;
};
constexpr Tags kTags[] = {{"<think>", "</think>"}, {"[THINK]", "[/THINK]"}};
constexpr std::string_view kResponseOpen = "<response>";
constexpr std::string_view kResponseClose = "</response>";

bool has(std::string_view s, std::string_view text) { return s.find(text) != std::string_view::npos; }

}  // namespace

bool template_thinks(std::string_view source) {
  for (const Tags& t : kTags)
    if (has(source, t.open) && has(source, t.close)) return true;
  return false;
}

bool template_thinks_in_control_tokens(std::string_view source) {
  return has(source, kTags[1].open) && has(source, kTags[1].close);
}

bool prompt_opens_thinking(std::string_view prompt) {
  for (const Tags& t : kTags) {
    const std::size_t open = prompt.rfind(t.open);
    if (open != std::string_view::npos && prompt.find(t.close, open) == std::string_view::npos) return true;
  }
  return false;
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
        // Leading white space, then an opening tag or the answer.
        std::size_t i = 0;
        while (i < pending_.size() && is_json_space(pending_[i])) ++i;
        const std::string_view head = std::string_view(pending_).substr(i);
        bool maybe = head.empty();
        for (int k = 0; k < 2; ++k) {
          const std::string_view open = kTags[k].open;
          if (head.substr(0, open.size()) == open) {
            pending_.erase(0, i + open.size());
            tags_ = k;
            state_ = State::kThinking;
            break;
          }
          maybe = maybe || open.starts_with(head);
        }
        if (state_ == State::kThinking) continue;
        if (!at_end && maybe) return;  // not known yet
        state_ = State::kAnswer;
        continue;
      }
      case State::kThinking: {
        // The closing tag of the pair that opened (either, when the prompt opened it).
        std::size_t close = std::string::npos, close_size = 0, hold = 0;
        for (int k = 0; k < 2; ++k) {
          if (tags_ >= 0 && k != tags_) continue;
          const std::size_t at = pending_.find(kTags[k].close);
          if (at < close) close = at, close_size = kTags[k].close.size();
          if (!at_end) hold = std::max(hold, partial_tag(pending_, kTags[k].close));
        }
        if (close == std::string::npos) {
          add(out, true, std::string_view(pending_).substr(0, pending_.size() - hold));
          pending_.erase(0, pending_.size() - hold);
          return;
        }
        add(out, true, std::string_view(pending_).substr(0, close));
        pending_.erase(0, close + close_size);
        state_ = State::kAnswer;
        after_close_ = true;
        continue;
      }
      case State::kAnswer:
        if (after_close_) {
          std::size_t i = 0;
          while (i < pending_.size() && is_json_space(pending_[i])) ++i;
          const std::string_view head = std::string_view(pending_).substr(i);
          if (!at_end && kResponseOpen.substr(0, head.size()) == head) return;  // not known yet
          // White space after the thought is layout; a <response> may wrap the answer.
          wrapped_ = head.starts_with(kResponseOpen);
          pending_.erase(0, i + (wrapped_ ? kResponseOpen.size() : 0));
          after_close_ = false;
        }
        if (wrapped_) {
          // The wrapper's closing tag ends the answer; hold back what may be it.
          if (at_end && trim_right(pending_).ends_with(kResponseClose)) {
            pending_.resize(trim_right(pending_).size() - kResponseClose.size());
          } else if (!at_end) {
            std::size_t hold = partial_tag(pending_, kResponseClose);
            const std::size_t last = pending_.rfind(kResponseClose);
            if (last != std::string::npos && trim_right(pending_).size() == last + kResponseClose.size())
              hold = pending_.size() - last;
            add(out, false, std::string_view(pending_).substr(0, pending_.size() - hold));
            pending_.erase(0, pending_.size() - hold);
            return;
          }
        }
        add(out, false, pending_);
        pending_.clear();
        return;
    }
  }
}

}  // namespace folio::server
