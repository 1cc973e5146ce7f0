#include "server/api/harmony_parser.h"

#include <algorithm>
#include <array>

namespace folio::server {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kConstrain = "<|constrain|>";
constexpr std::array<std::string_view, 7> kMarkers = {kMessage, kChannel, kStart, kEnd, kReturn, kCall, kConstrain};
constexpr std::size_t kLongestMarker = kConstrain.size();

// The word after `key` in a header: up to white space, the next marker or the end.
std::string_view word_after(std::string_view header, std::string_view key) {
  const std::size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + key.size());
  const std::size_t end = rest.find_first_of(" \t\n<");
  return rest.substr(0, end);
}

// Text with every marker taken out.
std::string without_markers(std::string_view text) {
  std::string out(text);
  for (std::string_view m : kMarkers)
    for (std::size_t at = out.find(m); at != std::string::npos; at = out.find(m, at)) out.erase(at, m.size());
  return out;
}

}  // namespace

bool template_is_harmony(std::string_view source) {
  return source.find(kChannel) != std::string_view::npos && source.find(kMessage) != std::string_view::npos;
}

std::vector<OutputEvent> HarmonyParser::feed(std::string_view text) {
  pending_ += text;
  std::vector<OutputEvent> out;
  run(out, false);
  return out;
}

std::vector<OutputEvent> HarmonyParser::finish() {
  std::vector<OutputEvent> out;
  run(out, true);
  if (state_ == State::kBody) close_message(out);
  return out;
}

void HarmonyParser::run(std::vector<OutputEvent>& out, bool at_end) {
  for (;;) {
    if (state_ == State::kHeader) {
      const std::size_t at = pending_.find(kMessage);
      if (at == std::string::npos) {
        if (!at_end) return;
        // An output that never opened a message is not the format's: its
        // text is the answer. An unfinished header after a message is dropped.
        if (!any_message_) {
          target_ = Target::kContent;
          emit(out, without_markers(pending_));
        }
        pending_.clear();
        return;
      }
      open_message(out, std::string_view(pending_).substr(0, at));
      pending_.erase(0, at + kMessage.size());
      state_ = State::kBody;
      continue;
    }
    const std::size_t open = pending_.find("<|");
    if (open == std::string::npos) {
      // A last '<' may open a marker: held back until the next text.
      const std::size_t keep = !at_end && !pending_.empty() && pending_.back() == '<' ? 1 : 0;
      emit(out, std::string_view(pending_).substr(0, pending_.size() - keep));
      pending_.erase(0, pending_.size() - keep);
      return;
    }
    emit(out, std::string_view(pending_).substr(0, open));
    pending_.erase(0, open);
    const std::size_t close = pending_.find("|>");
    if (close == std::string::npos || close + 2 > kLongestMarker) {
      // Not (yet) a marker: wait while it may still become one.
      if (close == std::string::npos && !at_end && pending_.size() < kLongestMarker) return;
      emit(out, "<|");
      pending_.erase(0, 2);
      continue;
    }
    const std::string_view marker = std::string_view(pending_).substr(0, close + 2);
    if (marker == kEnd || marker == kReturn || marker == kCall) {
      pending_.erase(0, marker.size());
      close_message(out);
      state_ = State::kHeader;
    } else if (marker == kStart || marker == kChannel) {
      close_message(out);  // a new header without <|end|>: the message is over
      state_ = State::kHeader;
    } else {
      emit(out, "<|");
      pending_.erase(0, 2);
    }
  }
}

void HarmonyParser::open_message(std::vector<OutputEvent>& out, std::string_view header) {
  any_message_ = true;
  const std::string_view recipient = word_after(header, "to=");
  if (!recipient.empty()) {
    constexpr std::string_view kFunctions = "functions.";
    const std::string_view name = recipient.starts_with(kFunctions) ? recipient.substr(kFunctions.size()) : recipient;
    target_ = Target::kCall;
    call_index_ = num_calls_++;
    call_has_arguments_ = false;
    out.push_back({OutputEvent::Kind::kCallStart, call_index_, std::string(name), new_tool_call_id()});
  } else {
    target_ = word_after(header, kChannel) == "analysis" ? Target::kReasoning : Target::kContent;
  }
}

void HarmonyParser::close_message(std::vector<OutputEvent>& out) {
  // A call with no text still has arguments: an empty object.
  if (target_ == Target::kCall && !call_has_arguments_) emit(out, "{}");
  target_ = Target::kContent;
}

void HarmonyParser::emit(std::vector<OutputEvent>& out, std::string_view text) {
  if (text.empty()) return;
  OutputEvent::Kind kind = OutputEvent::Kind::kContent;
  if (target_ == Target::kReasoning) kind = OutputEvent::Kind::kReasoning;
  if (target_ == Target::kCall) {
    kind = OutputEvent::Kind::kArguments;
    call_has_arguments_ = true;
  }
  const int index = target_ == Target::kCall ? call_index_ : 0;
  if (!out.empty() && out.back().kind == kind && out.back().index == index) {
    out.back().text += text;
  } else {
    out.push_back({kind, index, std::string(text), {}});
  }
}

}  // namespace folio::server
