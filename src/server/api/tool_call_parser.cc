#include "server/api/tool_call_parser.h"

#include <algorithm>
#include <cctype>

#include "server/api/json_schema_check.h"
#include "server/api/stream_text.h"

namespace folio::server {
namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFence = "```";
// Control tokens a model writes around or after its calls, dropped from a
// call region's ends before it is read.
constexpr std::string_view kEdgeMarkers[] = {"<|python_start|>", "<|python_end|>", "<|python_tag|>", "<|eom_id|>",
                                             "<|eom|>", "<|eot_id|>", "<|eot|>", "<|/tool_call|>", "<|end|>"};

bool only_space(std::string_view s) { return std::all_of(s.begin(), s.end(), is_json_space); }

// Where to look for `tag` in `text` next time, after a search from `from`
// found none: a region's closing tag is looked for in what came since, not
// in all of it again (a long call would cost quadratic time).
std::size_t resume_at(std::string_view text, std::string_view tag) {
  return text.size() >= tag.size() ? text.size() - tag.size() + 1 : 0;
}

std::string_view strip_markers(std::string_view s) {
  for (bool again = true; again;) {
    again = false;
    s = trim_right(trim_left(s));
    for (std::string_view m : kEdgeMarkers) {
      if (s.starts_with(m)) s.remove_prefix(m.size()), again = true;
      if (s.ends_with(m)) s.remove_suffix(m.size()), again = true;
    }
  }
  return s;
}

// Reads `{"name": "...", "arguments": ` from the start of a Hermes call's
// body. kMore: the body may still become that; kNo: it cannot.
enum class Prefix { kYes, kMore, kNo };
struct PrefixMatch {
  Prefix state = Prefix::kMore;
  std::string name;
  std::size_t end = 0;  // where the arguments begin
};

PrefixMatch match_hermes_prefix(std::string_view s) {
  PrefixMatch m;
  std::size_t i = 0;
  auto skip = [&] {
    while (i < s.size() && is_json_space(s[i])) ++i;
  };
  // Each literal must match as far as the text goes.
  auto literal = [&](std::string_view lit) -> Prefix {
    const std::size_t n = std::min(lit.size(), s.size() - i);
    if (s.substr(i, n) != lit.substr(0, n)) return Prefix::kNo;
    i += n;
    return n == lit.size() ? Prefix::kYes : Prefix::kMore;
  };
  for (std::string_view lit : {std::string_view("{"), std::string_view("\"name\""), std::string_view(":")}) {
    skip();
    if (Prefix p = literal(lit); p != Prefix::kYes) return m.state = p, m;
  }
  skip();
  if (i == s.size()) return m;
  if (s[i] != '"') return m.state = Prefix::kNo, m;
  const std::size_t quote = i++;
  while (i < s.size() && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
  if (i >= s.size()) return m;
  const Json name = Json::parse(s.substr(quote, i + 1 - quote), nullptr, /*allow_exceptions=*/false);
  if (!name.is_string()) return m.state = Prefix::kNo, m;
  ++i;
  for (std::string_view lit : {std::string_view(","), std::string_view("\"arguments\""), std::string_view(":")}) {
    skip();
    if (Prefix p = literal(lit); p != Prefix::kYes) return m.state = p, m;
  }
  skip();
  if (i == s.size()) return m;  // the arguments' first byte is not here yet
  m.state = Prefix::kYes;
  m.name = name.get<std::string>();
  m.end = i;
  return m;
}


std::vector<std::pair<std::string_view, std::string_view>> tag_pairs(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes:
    case ToolFormat::kGeneric:
    case ToolFormat::kQwenXml: return {{kCallOpen, kCallClose}};
    case ToolFormat::kMistral:
    case ToolFormat::kMistralArgs: return {{"[TOOL_CALLS]", ""}};
    case ToolFormat::kLlama3:
    case ToolFormat::kPythonic: return {{"<|python_tag|>", ""}, {"<|python_start|>", ""}};
    case ToolFormat::kGranite: return {{"<|tool_call|>", ""}};
    case ToolFormat::kPhi4Mini: return {{"<|tool_call|>", "<|/tool_call|>"}, {"functools[", ""}};
    case ToolFormat::kGlm4:
    case ToolFormat::kHarmony: return {};  // harmony is read by HarmonyParser
  }
  return {};
}

// The fenced block's first key, when it has come: a call object starts
// with one of these.
bool call_key(std::string_view key) {
  return key == "name" || key == "arguments" || key == "parameters" || key == "function" || key == "type" ||
         key == "id";
}

}  // namespace

ToolCallParser::ToolCallParser(ToolFormat format, const ToolRequest* tools)
    : format_(format), tools_(tools ? ToolSignatures(*tools) : ToolSignatures()), reads_fences_(tools != nullptr) {
  for (auto [open, close] : tag_pairs(format)) tags_.push_back({open, close, false});
  // Qwen3-Coder's calls, and Qwen3's when it writes them that way, may open
  // at <function=...> with no <tool_call> around them.
  if (format == ToolFormat::kQwenXml) tags_.push_back({"<function=", "</function>", true});
  if (reads_fences_) tags_.push_back({kFence, kFence, false});
}

std::vector<OutputEvent> ToolCallParser::feed(std::string_view text) {
  pending_ += text;
  std::vector<OutputEvent> out;
  run(out, false);
  return out;
}

std::vector<OutputEvent> ToolCallParser::finish() {
  std::vector<OutputEvent> out;
  run(out, true);
  return out;
}

void ToolCallParser::run(std::vector<OutputEvent>& out, bool at_end) {
  for (;;) {
    bool more = false;
    switch (region_) {
      case Region::kNone: more = in_text(out, at_end); break;
      case Region::kCall: more = in_call(out, at_end); break;
      case Region::kHermes: more = in_hermes(out, at_end); break;
      case Region::kFence: more = in_fence(out, at_end); break;
    }
    if (!more) return;
  }
}

void ToolCallParser::content(std::vector<OutputEvent>& out, std::string_view text) {
  if (text.empty()) return;
  // White space between or after calls is layout, not an answer: after a
  // call it waits for text to follow it, however the stream cuts it.
  std::string piece;
  if (num_calls_ > 0) {
    if (only_space(text)) {
      held_space_ += text;
      return;
    }
    piece = std::move(held_space_);
    held_space_.clear();
  }
  piece += text;
  if (!only_space(piece)) at_start_ = false;
  if (!out.empty() && out.back().kind == OutputEvent::Kind::kContent) {
    out.back().text += piece;
  } else {
    out.push_back({OutputEvent::Kind::kContent, 0, std::move(piece), {}});
  }
}

void ToolCallParser::emit_call(std::vector<OutputEvent>& out, const ToolCallText& call) {
  held_space_.clear();
  const int index = num_calls_++;
  // A Mistral template takes back only the 9-character ids it writes; the
  // model's own is kept when it is one.
  const bool own_id = mistral_ids(format_) && call.id.size() == 9 &&
                      std::all_of(call.id.begin(), call.id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
  out.push_back({OutputEvent::Kind::kCallStart, index, call.name, own_id ? call.id : new_tool_call_id(format_)});
  out.push_back({OutputEvent::Kind::kArguments, index, call.arguments, {}});
}

ToolCallParser::Guess ToolCallParser::bare_start(std::string_view head) const {
  switch (format_) {
    case ToolFormat::kMistral:
    case ToolFormat::kMistralArgs: {
      if (head.front() == '[' || head.front() == '{') return Guess::kYes;
      // NAME[ARGS] or NAME[CALL_ID]: the v11 form, its [TOOL_CALLS] a control token left out of the text.
      std::size_t i = 0;
      while (i < head.size() && i <= 64 && head[i] != '[' && !is_json_space(head[i])) ++i;
      if (i == head.size()) return tools_.may_start(head) ? Guess::kMaybe : Guess::kNo;
      if (head[i] != '[' || !tools_.may_call(head.substr(0, i))) return Guess::kNo;
      for (std::string_view t : {std::string_view("[ARGS]"), std::string_view("[CALL_ID]")}) {
        const std::size_t n = std::min(t.size(), head.size() - i);
        if (head.substr(i, n) == t.substr(0, n)) return n == t.size() ? Guess::kYes : Guess::kMaybe;
      }
      return Guess::kNo;
    }
    case ToolFormat::kLlama3:
    case ToolFormat::kPythonic: return head.front() == '{' || head.front() == '[' ? Guess::kYes : Guess::kNo;
    case ToolFormat::kGranite:
    case ToolFormat::kPhi4Mini: return head.front() == '[' ? Guess::kYes : Guess::kNo;
    case ToolFormat::kGlm4: {
      const std::size_t line_end = head.find('\n');
      if (line_end == std::string_view::npos) return tools_.may_start(head) ? Guess::kMaybe : Guess::kNo;
      return tools_.may_call(trim_right(head.substr(0, line_end))) ? Guess::kYes : Guess::kNo;
    }
    default: return Guess::kNo;
  }
}

bool ToolCallParser::in_text(std::vector<OutputEvent>& out, bool at_end) {
  if (at_start_ && format_ != ToolFormat::kHermes && format_ != ToolFormat::kGeneric &&
      format_ != ToolFormat::kQwenXml) {
    const std::string_view head = trim_left(pending_);
    if (head.empty()) {
      if (!at_end) return false;
      content(out, pending_);
      pending_.clear();
      return false;
    }
    // A tag at the start is read as a tag; anything that may still become
    // one waits.
    bool tag_ahead = false;
    for (const Tag& t : tags_) {
      const std::size_t n = std::min(t.open.size(), head.size());
      if (head.substr(0, n) == t.open.substr(0, n)) {
        tag_ahead = true;
        if (n < t.open.size() && !at_end) return false;
      }
    }
    if (!tag_ahead) {
      Guess g = bare_start(head);
      if (g == Guess::kMaybe && at_end) g = Guess::kNo;
      if (g == Guess::kMaybe) return false;
      at_start_ = false;
      if (g == Guess::kYes) {
        region_ = Region::kCall;
        tag_ = Tag{"", "", false};
        scanned_ = 0;
        return true;
      }
    }
  }
  // The first tag in the text, and where it starts.
  std::size_t at = std::string::npos;
  const Tag* found = nullptr;
  for (const Tag& t : tags_) {
    const std::size_t p = pending_.find(t.open);
    if (p < at) at = p, found = &t;
  }
  if (found == nullptr) {
    std::size_t hold = 0;
    if (!at_end)
      for (const Tag& t : tags_) hold = std::max(hold, partial_tag(pending_, t.open));
    content(out, std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
    return false;
  }
  content(out, std::string_view(pending_).substr(0, at));
  at_start_ = false;
  scanned_ = 0;
  tag_ = *found;
  pending_.erase(0, at + (found->keep ? 0 : found->open.size()));
  if (found->open == kFence) {
    region_ = Region::kFence;
  } else if (found->open == kCallOpen && (format_ == ToolFormat::kHermes || format_ == ToolFormat::kGeneric)) {
    region_ = Region::kHermes;
    call_started_ = false;
    args_sent_ = 0;
  } else {
    region_ = Region::kCall;
  }
  return true;
}

bool ToolCallParser::in_call(std::vector<OutputEvent>& out, bool at_end) {
  std::size_t body_end = pending_.size();
  std::size_t consumed = pending_.size();
  bool closed = false;
  if (!tag_.close.empty()) {
    // A kept opening tag is part of the body: look for the close after it.
    const std::size_t p = pending_.find(tag_.close, std::max(scanned_, tag_.keep ? tag_.open.size() : 0));
    if (p == std::string::npos) scanned_ = resume_at(pending_, tag_.close);
    if (p != std::string::npos) {
      closed = true;
      body_end = tag_.keep ? p + tag_.close.size() : p;
      consumed = p + tag_.close.size();
    }
  }
  if (!closed && !at_end) return false;  // the call's text has not all come
  const std::string_view body = std::string_view(pending_).substr(0, body_end);
  if (auto calls = read_region(body)) {
    for (const ToolCallText& c : *calls) emit_call(out, c);
  } else {  // not a call after all: the text as it was written
    std::string text = (tag_.keep ? std::string() : std::string(tag_.open)) + pending_.substr(0, consumed);
    content(out, text);
  }
  pending_.erase(0, consumed);
  region_ = Region::kNone;
  return true;
}

std::optional<std::vector<ToolCallText>> ToolCallParser::read_region(std::string_view body) const {
  body = strip_markers(body);
  switch (format_) {
    case ToolFormat::kHermes:
    case ToolFormat::kGeneric:
    case ToolFormat::kQwenXml:
      if (body.starts_with("<function=")) return read_qwen_xml_calls(body, tools_);
      return read_json_calls(body);
    case ToolFormat::kMistral:
    case ToolFormat::kMistralArgs: return read_mistral_calls(body);
    case ToolFormat::kLlama3:
    case ToolFormat::kPythonic:
      if (auto calls = read_json_calls(body)) return calls;
      return read_pythonic_calls(body);
    case ToolFormat::kGranite:
    case ToolFormat::kPhi4Mini:
      // After functools the list's opening bracket is part of the tag.
      if (tag_.open == "functools[") return read_json_calls("[" + std::string(body));
      return read_json_calls(body);
    case ToolFormat::kGlm4: return read_glm_calls(body, tools_);
    case ToolFormat::kHarmony: return std::nullopt;  // read by HarmonyParser
  }
  return std::nullopt;
}

// ---- Hermes: arguments stream as they come ---------------------------------

bool ToolCallParser::in_hermes(std::vector<OutputEvent>& out, bool at_end) {
  if (!call_started_) open_hermes_call(out);
  const std::size_t close = pending_.find(kCallClose, scanned_);
  if (close == std::string::npos) scanned_ = resume_at(pending_, kCallClose);
  if (close != std::string::npos) {
    close_hermes_call(out, std::string_view(pending_).substr(0, close));
    pending_.erase(0, close + kCallClose.size());
    region_ = Region::kNone;
    return true;
  }
  if (at_end) {  // cut off inside a call (max_tokens)
    if (call_started_) {
      std::string_view body(pending_);
      body.remove_suffix(partial_tag(body, kCallClose));
      close_hermes_call(out, body);
    } else {
      content(out, std::string(kCallOpen) + pending_);
    }
    pending_.clear();
    region_ = Region::kNone;
    return false;
  }
  if (call_started_) {
    // Arguments so far, less what may be the call's own closing brace,
    // white space or a cut-off closing tag.
    std::string_view ready(pending_);
    ready.remove_suffix(partial_tag(ready, kCallClose));
    while (!ready.empty() && (is_json_space(ready.back()) || ready.back() == '}')) ready.remove_suffix(1);
    if (ready.size() > args_sent_) {
      out.push_back({OutputEvent::Kind::kArguments, num_calls_ - 1,
                     escape_string_controls(ready.substr(args_sent_), args_state_), {}});
      args_sent_ = ready.size();
    }
  }
  return false;
}

void ToolCallParser::open_hermes_call(std::vector<OutputEvent>& out) {
  const PrefixMatch m = match_hermes_prefix(pending_);
  if (m.state != Prefix::kYes) return;  // kNo: read whole at the closing tag
  held_space_.clear();
  const int index = num_calls_++;
  out.push_back({OutputEvent::Kind::kCallStart, index, m.name, new_tool_call_id(format_)});
  pending_.erase(0, m.end);
  scanned_ = 0;
  call_started_ = true;
  args_state_ = {};
}

void ToolCallParser::close_hermes_call(std::vector<OutputEvent>& out, std::string_view body) {
  if (call_started_) {
    std::string_view args = trim_right(body);
    if (!args.empty() && args.back() == '}') args.remove_suffix(1);  // the call object's own
    args = trim_right(args);
    if (args.size() > args_sent_)
      out.push_back({OutputEvent::Kind::kArguments, num_calls_ - 1,
                     escape_string_controls(args.substr(args_sent_), args_state_), {}});
    return;
  }
  if (auto calls = read_region(body)) {
    for (const ToolCallText& c : *calls) emit_call(out, c);
    return;
  }
  content(out, std::string(kCallOpen) + std::string(body) + std::string(kCallClose));
}

// ---- Fenced JSON: a call only when it fits an offered tool -----------------

ToolCallParser::Guess ToolCallParser::fence_start(std::string_view body) const {
  // The info string: none, or one that says JSON.
  const std::size_t line_end = body.find('\n');
  const std::string_view info = trim_right(body.substr(0, line_end));
  bool known = false;
  for (std::string_view ok : {"json", "JSON", "tool_call", ""}) {
    if (line_end == std::string_view::npos ? ok.starts_with(info) : ok == info) known = true;
  }
  if (!known) return Guess::kNo;
  if (line_end == std::string_view::npos) return Guess::kMaybe;
  // Then an object (or a list of them) whose first key a call starts with.
  std::size_t i = line_end + 1;
  auto skip = [&] {
    while (i < body.size() && is_json_space(body[i])) ++i;
  };
  skip();
  if (i < body.size() && body[i] == '[') ++i, skip();
  if (i == body.size()) return Guess::kMaybe;
  if (body[i] != '{') return Guess::kNo;
  ++i;
  skip();
  if (i == body.size()) return Guess::kMaybe;
  if (body[i] != '"') return Guess::kNo;
  const std::size_t key_end = body.find('"', i + 1);
  if (key_end == std::string_view::npos) return body.size() - i > 16 ? Guess::kNo : Guess::kMaybe;
  return call_key(body.substr(i + 1, key_end - i - 1)) ? Guess::kYes : Guess::kNo;
}

std::optional<std::vector<ToolCallText>> ToolCallParser::read_fence(std::string_view body) const {
  const std::size_t line_end = body.find('\n');
  if (line_end == std::string_view::npos) return std::nullopt;
  auto calls = read_json_calls(body.substr(line_end + 1));
  if (!calls) return std::nullopt;
  for (const ToolCallText& c : *calls) {
    const Json* schema = tools_.parameters_of(c.name);
    const std::optional<Json> args = parse_json(c.arguments);
    if (schema == nullptr || !args || !args->is_object() || !fits_schema(*args, *schema)) return std::nullopt;
  }
  return calls;
}

bool ToolCallParser::in_fence(std::vector<OutputEvent>& out, bool at_end) {
  const Guess g = fence_start(pending_);
  if (g == Guess::kNo) {
    // A code block: the fence is content, and the text after it is read on
    // as any text is (its closing fence opens a block that is no call).
    content(out, kFence);
    region_ = Region::kNone;
    return true;
  }
  const std::size_t line_end = pending_.find('\n');
  const std::size_t close =
      line_end == std::string::npos ? std::string::npos : pending_.find(kFence, std::max(line_end, scanned_));
  if (close == std::string::npos) {
    if (line_end != std::string::npos) scanned_ = resume_at(pending_, kFence);
    if (!at_end) return false;  // the block has not all come
    content(out, std::string(kFence) + pending_);  // cut off: no call is guessed from part of one
    pending_.clear();
    region_ = Region::kNone;
    return false;
  }
  if (auto calls = read_fence(std::string_view(pending_).substr(0, close))) {
    for (const ToolCallText& c : *calls) emit_call(out, c);
  } else {
    content(out, std::string(kFence) + pending_.substr(0, close + kFence.size()));
  }
  pending_.erase(0, close + kFence.size());
  region_ = Region::kNone;
  return true;
}

}  // namespace folio::server
