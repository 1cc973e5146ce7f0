#include "server/api/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "server/api/api_error.h"
#include "server/api/harmony_parser.h"
#include "server/api/stream_text.h"
#include "server/http/http_message.h"

namespace folio::server {
namespace {

constexpr std::size_t kMaxTools = 128;
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool only_space(std::string_view s) { return std::all_of(s.begin(), s.end(), is_json_space); }

// OpenAI's rule for function names.
bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
          c == '.'))
      return false;
  return true;
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

// A parsed call's arguments as the JSON text OpenAI sends: an object's text,
// or a string's content when the model wrote them as a string.
std::string arguments_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  return dump_json(v);
}

// {"name": ..., "arguments"|"parameters": ...} as (name, arguments); nullopt otherwise.
std::optional<std::pair<std::string, std::string>> read_call(const Json& v) {
  if (!v.is_object()) return std::nullopt;
  auto name = v.find("name");
  if (name == v.end() || !name->is_string()) return std::nullopt;
  auto args = v.find("arguments");
  if (args == v.end()) args = v.find("parameters");
  if (args == v.end()) return std::make_pair(name->get<std::string>(), std::string("{}"));
  return std::make_pair(name->get<std::string>(), arguments_text(*args));
}

Json tag_json(const std::string& begin, const Json& schema, const std::string& end) {
  // One white-space character at a time: a small model left free spends
  // its tokens on indentation.
  return Json{{"type", "tag"},
                      {"begin", begin},
                      {"content", {{"type", "json_schema"}, {"json_schema", schema}, {"max_whitespace_cnt", 1}}},
                      {"end", end}};
}

}  // namespace

ToolFormat tool_format_of(std::string_view source) {
  if (template_is_harmony(source)) return ToolFormat::kHarmony;
  if (source.find("[TOOL_CALLS]") != std::string_view::npos) return ToolFormat::kMistral;
  if (source.find("<tool_call>") != std::string_view::npos) return ToolFormat::kHermes;
  if (source.find("<|python_tag|>") != std::string_view::npos ||
      (source.find("tools") != std::string_view::npos && source.find("\"parameters\"") != std::string_view::npos))
    return ToolFormat::kLlama3;
  return ToolFormat::kGeneric;
}

std::optional<ToolRequest> read_tools(const Json& body) {
  std::optional<bool> parallel = get_bool(body, "parallel_tool_calls");
  return read_tools(field_of(body, "tools"), field_of(body, "tool_choice"), parallel);
}

std::optional<ToolRequest> read_tools(const Json* tools, const Json* choice, std::optional<bool> parallel) {
  ToolRequest out;
  const bool has_tools = tools != nullptr && !(tools->is_array() && tools->empty());
  if (choice != nullptr) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") {
        out.choice = ToolRequest::Choice::kNone;
      } else if (c == "auto") {
        out.choice = ToolRequest::Choice::kAuto;
      } else if (c == "required") {
        out.choice = ToolRequest::Choice::kRequired;
      } else {
        bad_request("tool_choice", fmt::format("tool_choice \"{}\" is not one of \"none\", \"auto\", \"required\" "
                                               "or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
                                               printable(c, 64)));
      }
    } else if (choice->is_object()) {
      const Json* fn = field_of(*choice, "function");
      const Json* name = fn != nullptr && fn->is_object() ? field_of(*fn, "name") : nullptr;
      if (name != nullptr && !name->is_string()) name = nullptr;
      if (name == nullptr)
        bad_request("tool_choice",
                    "tool_choice as an object must be {\"type\": \"function\", \"function\": "
                    "{\"name\": ...}}");
      out.choice = ToolRequest::Choice::kFunction;
      out.function = name->get<std::string>();
    } else {
      bad_request("tool_choice", "tool_choice must be a string or an object naming a function");
    }
  }
  if (!has_tools) {
    if (out.choice == ToolRequest::Choice::kRequired || out.choice == ToolRequest::Choice::kFunction)
      bad_request("tool_choice", "tool_choice asks for a tool call, but the request has no tools");
    return std::nullopt;
  }
  if (!tools->is_array()) bad_request("tools", "tools must be an array of {\"type\": \"function\", ...} objects");
  if (tools->size() > kMaxTools)
    bad_request("tools", fmt::format("tools lists {} tools; at most {} are allowed", tools->size(), kMaxTools));
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!t.is_object()) bad_request("tools", fmt::format("{} must be an object", where));
    auto type = t.find("type");
    if (type == t.end() || !type->is_string() || type->get<std::string>() != "function")
      bad_request("tools", fmt::format("{}.type must be \"function\" (the only kind of tool served)", where));
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) bad_request("tools", fmt::format("{}.function must be an object", where));
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || !valid_name(name->get_ref<const std::string&>()))
      bad_request("tools", fmt::format("{}.function.name must be 1 to 64 letters, digits, '_', '-' or '.'", where));
    if (std::find(out.names.begin(), out.names.end(), name->get<std::string>()) != out.names.end())
      bad_request("tools", fmt::format("{} repeats the function name \"{}\"", where, name->get<std::string>()));
    if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string())
      bad_request("tools", fmt::format("{}.function.description must be a string", where));
    const Json* params = field_of(*fn, "parameters");
    if (params != nullptr && !params->is_object())
      bad_request("tools", fmt::format("{}.function.parameters must be a JSON schema object", where));
    out.names.push_back(name->get<std::string>());
    out.parameters.push_back(params != nullptr ? *params : Json{{"type", "object"}});
  }
  out.definitions = *tools;
  if (out.choice == ToolRequest::Choice::kFunction &&
      std::find(out.names.begin(), out.names.end(), out.function) == out.names.end())
    bad_request("tool_choice", fmt::format("tool_choice names the function \"{}\", which is not in tools",
                                           printable(out.function, 64)));
  if (parallel) out.parallel = *parallel;
  return out;
}

std::optional<ConstraintSpec> tool_constraint(const ToolRequest& tools, ToolFormat format) {
  if (tools.choice == ToolRequest::Choice::kNone || format == ToolFormat::kHarmony) return std::nullopt;
  const bool forced = tools.choice != ToolRequest::Choice::kAuto;
  Json tags = Json::array();
  for (std::size_t i = 0; i < tools.names.size(); ++i) {
    if (tools.choice == ToolRequest::Choice::kFunction && tools.names[i] != tools.function) continue;
    const std::string& name = tools.names[i];  // valid_name: nothing to escape
    switch (format) {
      case ToolFormat::kHermes:
      case ToolFormat::kGeneric:
        tags.push_back(tag_json(fmt::format("{}\n{{\"name\": \"{}\", \"arguments\": ", kCallOpen, name),
                                tools.parameters[i], fmt::format("}}\n{}", kCallClose)));
        break;
      case ToolFormat::kMistral:  // [TOOL_CALLS] is a control token: the grammar starts after it
        tags.push_back(tag_json(fmt::format("{{\"name\": \"{}\", \"arguments\": ", name), tools.parameters[i], "}"));
        break;
      case ToolFormat::kLlama3:
        tags.push_back(tag_json(fmt::format("{{\"name\": \"{}\", \"parameters\": ", name), tools.parameters[i], "}"));
        break;
      case ToolFormat::kHarmony:
        break;
    }
  }
  Json format_json;
  if (forced) {
    const bool mistral = format == ToolFormat::kMistral;
    Json calls = {{"type", "tags_with_separator"},
                          {"tags", std::move(tags)},
                          {"separator", mistral ? ", " : (format == ToolFormat::kLlama3 ? "; " : "\n")},
                          {"at_least_one", true},
                          {"stop_after_first", !tools.parallel}};
    format_json = mistral
                      ? Json{{"type", "sequence"},
                                     {"elements", Json::array({{{"type", "const_string"}, {"value", "["}},
                                                                       std::move(calls),
                                                                       {{"type", "const_string"}, {"value", "]"}}})}}
                      : std::move(calls);
  } else {
    // auto: free text, and a call from its opening tag on. Formats whose
    // call opens with no tag of its own (or a control token) stay free.
    if (format != ToolFormat::kHermes && format != ToolFormat::kGeneric) return std::nullopt;
    format_json = {{"type", "triggered_tags"},
                   {"triggers", Json::array({std::string(kCallOpen)})},
                   {"tags", std::move(tags)},
                   {"at_least_one", false},
                   {"stop_after_first", !tools.parallel}};
  }
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kStructuralTag;
  spec.text = dump_json(Json{{"type", "structural_tag"}, {"format", std::move(format_json)}});
  return spec;
}

std::string generic_tools_prompt(const ToolRequest& tools) {
  std::string out =
      "# Tools\n\nYou can call functions to help answer the user. Their signatures are listed inside <tools></tools> "
      "tags:\n<tools>";
  for (const Json& t : tools.definitions) out += "\n" + dump_json(t);
  out +=
      "\n</tools>\n\nTo call a function, answer with a JSON object holding its name and arguments inside "
      "<tool_call></tool_call> tags, one block per call:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<arguments-json-object>}\n</tool_call>";
  return out;
}

std::string new_tool_call_id() {
  static const std::uint64_t nonce = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<std::uint64_t> counter{0};
  return fmt::format("call_{:016x}{:08x}", nonce, counter.fetch_add(1) & 0xFFFFFFFFu);
}

ToolCallParser::ToolCallParser(ToolFormat format) : format_(format) {}

std::vector<OutputEvent> ToolCallParser::feed(std::string_view text) {
  pending_ += text;
  std::vector<OutputEvent> out;
  if (format_ == ToolFormat::kHermes || format_ == ToolFormat::kGeneric) {
    feed_hermes(out, false);
  } else {
    feed_whole(out, false);
  }
  return out;
}

std::vector<OutputEvent> ToolCallParser::finish() {
  std::vector<OutputEvent> out;
  if (format_ == ToolFormat::kHermes || format_ == ToolFormat::kGeneric) {
    feed_hermes(out, true);
  } else {
    feed_whole(out, true);
  }
  return out;
}

void ToolCallParser::emit_call(std::vector<OutputEvent>& out, const std::string& name, const std::string& arguments) {
  const int index = num_calls_++;
  out.push_back({OutputEvent::Kind::kCallStart, index, name, new_tool_call_id()});
  out.push_back({OutputEvent::Kind::kArguments, index, arguments, {}});
}

void ToolCallParser::feed_hermes(std::vector<OutputEvent>& out, bool at_end) {
  auto content = [&](std::string_view text) {
    // White space between or after calls is layout, not an answer.
    if (text.empty() || (num_calls_ > 0 && only_space(text))) return;
    if (!out.empty() && out.back().kind == OutputEvent::Kind::kContent) {
      out.back().text += text;
    } else {
      out.push_back({OutputEvent::Kind::kContent, 0, std::string(text), {}});
    }
  };
  for (;;) {
    if (!in_call_) {
      const std::size_t open = pending_.find(kCallOpen);
      if (open == std::string::npos) {
        const std::size_t hold = at_end ? 0 : partial_tag(pending_, kCallOpen);
        content(std::string_view(pending_).substr(0, pending_.size() - hold));
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      content(std::string_view(pending_).substr(0, open));
      pending_.erase(0, open + kCallOpen.size());
      in_call_ = true;
      call_started_ = false;
      args_sent_ = 0;
      continue;
    }
    if (!call_started_) open_call_hermes(out);
    const std::size_t close = pending_.find(kCallClose);
    if (close != std::string::npos) {
      close_call_hermes(out, std::string_view(pending_).substr(0, close), call_started_);
      pending_.erase(0, close + kCallClose.size());
      in_call_ = false;
      continue;
    }
    if (at_end) {  // cut off inside a call (max_tokens)
      if (call_started_) {
        std::string_view body(pending_);
        body.remove_suffix(partial_tag(body, kCallClose));
        close_call_hermes(out, body, true);
      } else {
        content(std::string(kCallOpen) + pending_);
      }
      pending_.clear();
      in_call_ = false;
      return;
    }
    if (call_started_) {
      // Arguments so far, less what may be the call's own closing brace,
      // white space or a cut-off closing tag.
      std::string_view ready(pending_);
      ready.remove_suffix(partial_tag(ready, kCallClose));
      while (!ready.empty() && (is_json_space(ready.back()) || ready.back() == '}')) ready.remove_suffix(1);
      if (ready.size() > args_sent_) {
        out.push_back({OutputEvent::Kind::kArguments, num_calls_ - 1, std::string(ready.substr(args_sent_)), {}});
        args_sent_ = ready.size();
      }
    }
    return;
  }
}

void ToolCallParser::open_call_hermes(std::vector<OutputEvent>& out) {
  const PrefixMatch m = match_hermes_prefix(pending_);
  if (m.state != Prefix::kYes) return;  // kNo: read whole at the closing tag
  const int index = num_calls_++;
  out.push_back({OutputEvent::Kind::kCallStart, index, m.name, new_tool_call_id()});
  pending_.erase(0, m.end);
  call_started_ = true;
}

void ToolCallParser::close_call_hermes(std::vector<OutputEvent>& out, std::string_view body, bool streamed_start) {
  if (streamed_start) {
    std::string_view args = trim_right(body);
    if (!args.empty() && args.back() == '}') args.remove_suffix(1);  // the call object's own
    args = trim_right(args);
    if (args.size() > args_sent_)
      out.push_back({OutputEvent::Kind::kArguments, num_calls_ - 1, std::string(args.substr(args_sent_)), {}});
    return;
  }
  const std::optional<Json> v = parse_json(trim_left(body));
  const auto call = v ? read_call(*v) : std::nullopt;
  if (!call) {  // not a call after all: the text as it was written
    std::string text = std::string(kCallOpen) + std::string(body) + std::string(kCallClose);
    out.push_back({OutputEvent::Kind::kContent, 0, std::move(text), {}});
    return;
  }
  emit_call(out, call->first, call->second);
}

void ToolCallParser::feed_whole(std::vector<OutputEvent>& out, bool at_end) {
  if (!decided_) {
    const std::string_view head = trim_left(pending_);
    const std::string_view tags[] = {format_ == ToolFormat::kMistral ? kMistralTag : kPythonTag};
    bool maybe = false;
    for (std::string_view tag : tags) {
      const std::size_t n = std::min(head.size(), tag.size());
      if (head.substr(0, n) == tag.substr(0, n)) {
        whole_ = n == tag.size();
        maybe = n < tag.size();
      }
    }
    // A call may also open bare: [{...}] (Mistral, its tag a control token
    // the text leaves out) or {...} (Llama 3).
    const char bare = format_ == ToolFormat::kMistral ? '[' : '{';
    if (!whole_ && !head.empty() && head.front() == bare) whole_ = true;
    if (!whole_ && (maybe || head.empty()) && !at_end) return;  // not known yet
    decided_ = true;
  }
  if (!whole_) {
    if (!pending_.empty()) out.push_back({OutputEvent::Kind::kContent, 0, std::move(pending_), {}});
    pending_.clear();
    return;
  }
  if (!at_end) return;  // calls are read whole, at the end
  std::string_view rest = trim_left(pending_);
  for (std::string_view tag : {kMistralTag, kPythonTag})
    if (rest.substr(0, tag.size()) == tag) rest = trim_left(rest.substr(tag.size()));
  std::vector<std::pair<std::string, std::string>> calls;
  bool ok = false;
  if (auto v = parse_json(trim_right(rest))) {
    ok = true;
    const Json all = v->is_array() ? *v : Json::array({*v});
    for (const Json& c : all) {
      auto call = read_call(c);
      if (!call) {
        ok = false;
        break;
      }
      calls.push_back(std::move(*call));
    }
  } else if (format_ == ToolFormat::kLlama3) {
    // Several calls, one JSON object each, separated by ';'.
    ok = true;
    std::size_t from = 0;
    while (ok && from <= rest.size()) {
      std::size_t semi = rest.find(';', from);
      if (semi == std::string_view::npos) semi = rest.size();
      auto one = parse_json(trim_right(trim_left(rest.substr(from, semi - from))));
      auto call = one ? read_call(*one) : std::nullopt;
      if (!call) ok = false;
      if (call) calls.push_back(std::move(*call));
      from = semi + 1;
    }
  }
  if (!ok || calls.empty()) {
    out.push_back({OutputEvent::Kind::kContent, 0, std::move(pending_), {}});
  } else {
    for (const auto& [name, args] : calls) emit_call(out, name, args);
  }
  pending_.clear();
}

}  // namespace folio::server
