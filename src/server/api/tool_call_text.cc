#include "server/api/tool_call_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "server/api/stream_text.h"
#include "server/api/tool_calls.h"

namespace folio::server {
namespace {

constexpr std::string_view kMistralTag = "[TOOL_CALLS]";
constexpr std::string_view kArgsTag = "[ARGS]";
constexpr std::string_view kCallIdTag = "[CALL_ID]";
constexpr std::string_view kGlmTurn = "<|assistant|>";
constexpr int kMaxLiteralDepth = 64;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && is_json_space(s[i])) ++i;
  return i;
}

// A call's arguments as the JSON text OpenAI sends.
std::string arguments_text(const Json& v) { return v.is_string() ? v.get<std::string>() : dump_json(v); }

// The JSON value of one object or array at `at`; advances `at` past it.
std::optional<Json> json_at(std::string_view s, std::size_t& at) {
  const std::size_t begin = skip_space(s, at);
  const std::size_t end = json_container_end(s, begin);
  if (end == std::string_view::npos) return std::nullopt;
  JsonStringState state;
  std::optional<Json> v = parse_json(escape_string_controls(s.substr(begin, end - begin), state));
  if (v) at = end;
  return v;
}

// ---- Python literals -------------------------------------------------------

class PythonLiteral {
 public:
  explicit PythonLiteral(std::string_view s) : s_(s) {}

  std::size_t pos() const { return i_; }
  void set_pos(std::size_t i) { i_ = i; }
  void skip() { i_ = skip_space(s_, i_); }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::string identifier() {
    skip();
    const std::size_t begin = i_;
    while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
    return std::string(s_.substr(begin, i_ - begin));
  }

  std::optional<Json> value(int depth = 0) {
    if (depth > kMaxLiteralDepth) return std::nullopt;
    skip();
    if (i_ >= s_.size()) return std::nullopt;
    const char c = s_[i_];
    if (c == '"' || c == '\'') return string();
    if (c == '[' || c == '(') return sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return dict(depth);
    if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) return number();
    for (auto [word, v] : {std::pair<std::string_view, Json>{"True", true}, {"False", false}, {"None", nullptr},
                           {"true", true}, {"false", false}, {"null", nullptr}}) {
      if (s_.substr(i_, word.size()) == word && (i_ + word.size() == s_.size() || !is_name_char(s_[i_ + word.size()]))) {
        i_ += word.size();
        return v;
      }
    }
    return std::nullopt;
  }

 private:
  std::optional<Json> string() {
    const char quote = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != quote) {
      char c = s_[i_++];
      if (c == '\n') return std::nullopt;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return std::nullopt;
      c = s_[i_++];
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) return std::nullopt;
          const std::string hex(s_.substr(i_, 4));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + 4 || (cp >= 0xD800 && cp < 0xE000)) return std::nullopt;
          i_ += 4;
          append_utf8(out, static_cast<char32_t>(cp));
          break;
        }
        default: out += c;  // \\, \', \" and anything else as itself
      }
    }
    if (i_ >= s_.size()) return std::nullopt;
    ++i_;
    return Json(out);
  }

  static void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::optional<Json> number() {
    const std::size_t begin = i_;
    if (s_[i_] == '-' || s_[i_] == '+') ++i_;
    while (i_ < s_.size() && ((s_[i_] >= '0' && s_[i_] <= '9') || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' ||
                              s_[i_] == '_' || ((s_[i_] == '-' || s_[i_] == '+') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E'))))
      ++i_;
    std::string text(s_.substr(begin, i_ - begin));
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    if (!text.empty() && text[0] == '+') text.erase(0, 1);
    std::optional<Json> v = parse_json(text);
    if (!v || !v->is_number()) {
      // Python writes 1. and .5, which JSON does not.
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size()) return std::nullopt;
      return Json(d);
    }
    return v;
  }

  std::optional<Json> sequence(char close, int depth) {
    ++i_;
    Json out = Json::array();
    for (;;) {
      if (eat(close)) return out;
      std::optional<Json> v = value(depth + 1);
      if (!v) return std::nullopt;
      out.push_back(std::move(*v));
      if (eat(',')) continue;
      if (eat(close)) return out;
      return std::nullopt;
    }
  }

  std::optional<Json> dict(int depth) {
    ++i_;
    Json out = Json::object();
    for (;;) {
      if (eat('}')) return out;
      std::optional<Json> key = value(depth + 1);
      if (!key || !key->is_string() || !eat(':')) return std::nullopt;
      std::optional<Json> v = value(depth + 1);
      if (!v) return std::nullopt;
      out[key->get<std::string>()] = std::move(*v);
      if (eat(',')) continue;
      if (eat('}')) return out;
      return std::nullopt;
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

// ---- Qwen3-Coder's XML -----------------------------------------------------

// A parameter's text as the JSON its schema types it as.
Json typed_value(std::string_view text, const Json* schema) {
  std::string type;
  if (schema != nullptr && schema->is_object()) {
    if (auto t = schema->find("type"); t != schema->end()) {
      if (t->is_string()) type = t->get<std::string>();
      if (t->is_array() && !t->empty() && (*t)[0].is_string()) type = (*t)[0].get<std::string>();
    }
  }
  if (type.empty() || type == "string") {
    // A forced call's grammar lets white space stand around a string it
    // bounds (a length, an enum, a pattern), outside the value; a free
    // string's white space is its own.
    if (schema != nullptr)
      for (const char* key : {"maxLength", "minLength", "enum", "const", "pattern", "format"})
        if (schema->contains(key)) text = trim_right(trim_left(text));
    return Json(std::string(text));
  }
  const std::string_view trimmed = trim_right(trim_left(text));
  if (std::optional<Json> v = parse_json(trimmed)) return *v;
  if (type == "boolean") {
    if (trimmed == "True") return true;
    if (trimmed == "False") return false;
  }
  if (type == "null" && trimmed == "None") return nullptr;
  if (type == "object" || type == "array") {
    PythonLiteral p(trimmed);
    std::optional<Json> v = p.value();
    p.skip();
    if (v && p.pos() == trimmed.size()) return *v;
  }
  return Json(std::string(text));
}

// One <function=NAME>...</function> block at `at` (white space before it
// allowed); advances `at` past it.
std::optional<ToolCallText> qwen_function_at(std::string_view s, std::size_t& at, const ToolSignatures& tools) {
  constexpr std::string_view kOpen = "<function=";
  constexpr std::string_view kClose = "</function>";
  constexpr std::string_view kParam = "<parameter=";
  constexpr std::string_view kParamClose = "</parameter>";
  std::size_t i = skip_space(s, at);
  if (s.substr(i, kOpen.size()) != kOpen) return std::nullopt;
  i += kOpen.size();
  const std::size_t name_end = s.find('>', i);
  if (name_end == std::string_view::npos) return std::nullopt;
  const std::string name(trim_right(trim_left(s.substr(i, name_end - i))));
  if (!tools.may_call(name)) return std::nullopt;
  const std::size_t close = s.find(kClose, name_end);
  if (close == std::string_view::npos) return std::nullopt;
  const std::string_view body = s.substr(name_end + 1, close - name_end - 1);
  const Json* schema = tools.parameters_of(name);
  const Json* properties = nullptr;
  if (schema != nullptr && schema->is_object())
    if (auto p = schema->find("properties"); p != schema->end() && p->is_object()) properties = &*p;
  Json args = Json::object();
  std::size_t j = skip_space(body, 0);
  while (j < body.size()) {
    if (body.substr(j, kParam.size()) != kParam) return std::nullopt;
    j += kParam.size();
    const std::size_t key_end = body.find('>', j);
    if (key_end == std::string_view::npos) return std::nullopt;
    const std::string key(trim_right(trim_left(body.substr(j, key_end - j))));
    if (key.empty() || args.contains(key)) return std::nullopt;
    // The value runs to its closing tag, or (a model that leaves it out) to
    // the next parameter.
    std::size_t value_end = body.find(kParamClose, key_end);
    std::size_t next = value_end == std::string_view::npos ? std::string_view::npos : value_end + kParamClose.size();
    const std::size_t next_param = body.find(kParam, key_end);
    if (next_param < value_end) value_end = next = next_param;
    if (value_end == std::string_view::npos) value_end = next = body.size();
    std::string_view value = body.substr(key_end + 1, value_end - key_end - 1);
    // The template puts the value on lines of its own.
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    const Json* property = nullptr;
    if (properties != nullptr)
      if (auto p = properties->find(key); p != properties->end()) property = &*p;
    args[key] = typed_value(value, property);
    j = skip_space(body, next);
  }
  at = close + kClose.size();
  return ToolCallText{name, dump_json(args), {}};
}

}  // namespace

ToolSignatures::ToolSignatures(const ToolRequest& tools) : names_(tools.names), parameters_(tools.parameters) {}

const Json* ToolSignatures::parameters_of(std::string_view name) const {
  for (std::size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return &parameters_[i];
  return nullptr;
}

bool ToolSignatures::may_call(std::string_view name) const { return empty() ? valid_tool_name(name) : offers(name); }

bool ToolSignatures::may_start(std::string_view text) const {
  if (empty()) return std::all_of(text.begin(), text.end(), is_name_char) && text.size() <= 64;
  return std::any_of(names_.begin(), names_.end(), [&](const std::string& n) { return n.starts_with(text); });
}

std::string python_literal(const Json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_literal(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      out += (first ? "" : ", ") + dump_json(Json(key)) + ": " + python_literal(value);
      first = false;
    }
    return out + "}";
  }
  return dump_json(v);  // strings and numbers are written alike
}

bool valid_tool_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), is_name_char);
}

std::string escape_string_controls(std::string_view text, JsonStringState& state) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (!state.in_string) {
      state.in_string = c == '"';
    } else if (state.escaped) {
      state.escaped = false;
    } else if (c == '\\') {
      state.escaped = true;
    } else if (c == '"') {
      state.in_string = false;
    } else if (c < 0x20) {
      switch (c) {
        case '\t': out += "\\t"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        default: out += fmt::format("\\u{:04x}", c);
      }
      continue;
    }
    out += ch;
  }
  return out;
}

std::size_t json_container_end(std::string_view s, std::size_t from) {
  if (from >= s.size() || (s[from] != '{' && s[from] != '[')) return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return std::string_view::npos;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<ToolCallText> call_of_json(const Json& v) {
  if (!v.is_object()) return std::nullopt;
  const Json* call = &v;
  if (auto fn = v.find("function"); fn != v.end() && fn->is_object() && !v.contains("name")) call = &*fn;
  auto name = call->find("name");
  if (name == call->end() || !name->is_string() || !valid_tool_name(name->get_ref<const std::string&>()))
    return std::nullopt;
  ToolCallText out{name->get<std::string>(), "{}", {}};
  auto args = call->find("arguments");
  if (args == call->end()) args = call->find("parameters");
  if (args != call->end()) {
    if (!args->is_object() && !args->is_string()) return std::nullopt;
    out.arguments = arguments_text(*args);
  }
  if (auto id = v.find("id"); id != v.end() && id->is_string()) out.id = id->get<std::string>();
  return out;
}

std::optional<std::vector<ToolCallText>> read_json_calls(std::string_view text) {
  std::vector<ToolCallText> calls;
  std::size_t at = skip_space(text, 0);
  if (at < text.size() && text[at] == '[') {
    std::optional<Json> all = json_at(text, at);
    if (!all || !all->is_array() || all->empty() || skip_space(text, at) != text.size()) return std::nullopt;
    for (const Json& c : *all) {
      std::optional<ToolCallText> call = call_of_json(c);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  while (at < text.size()) {
    std::optional<Json> one = json_at(text, at);
    std::optional<ToolCallText> call = one ? call_of_json(*one) : std::nullopt;
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    at = skip_space(text, at);
    if (at < text.size() && (text[at] == ',' || text[at] == ';')) at = skip_space(text, at + 1);
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::optional<std::vector<ToolCallText>> read_pythonic_calls(std::string_view text) {
  PythonLiteral p(text);
  if (!p.eat('[')) return std::nullopt;
  std::vector<ToolCallText> calls;
  for (;;) {
    const std::string name = p.identifier();
    if (!valid_tool_name(name) || !p.eat('(')) return std::nullopt;
    Json args = Json::object();
    if (!p.eat(')')) {
      for (;;) {
        const std::string key = p.identifier();
        if (key.empty() || args.contains(key) || !p.eat('=')) return std::nullopt;
        std::optional<Json> v = p.value();
        if (!v) return std::nullopt;
        args[key] = std::move(*v);
        if (p.eat(',')) {
          if (p.eat(')')) break;
          continue;
        }
        if (p.eat(')')) break;
        return std::nullopt;
      }
    }
    calls.push_back({name, dump_json(args), {}});
    if (p.eat(',')) continue;
    if (p.eat(']')) break;
    return std::nullopt;
  }
  p.skip();
  if (p.pos() != text.size()) return std::nullopt;
  return calls;
}

std::optional<std::vector<ToolCallText>> read_qwen_xml_calls(std::string_view text, const ToolSignatures& tools) {
  constexpr std::string_view kWrapOpen = "<tool_call>";
  constexpr std::string_view kWrapClose = "</tool_call>";
  std::vector<ToolCallText> calls;
  std::size_t at = skip_space(text, 0);
  while (at < text.size()) {
    const bool wrapped = text.substr(at, kWrapOpen.size()) == kWrapOpen;
    if (wrapped) at += kWrapOpen.size();
    std::optional<ToolCallText> call = qwen_function_at(text, at, tools);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    at = skip_space(text, at);
    if (wrapped) {
      if (text.substr(at, kWrapClose.size()) != kWrapClose) return std::nullopt;
      at = skip_space(text, at + kWrapClose.size());
    }
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::optional<std::vector<ToolCallText>> read_mistral_calls(std::string_view text) {
  std::size_t at = skip_space(text, 0);
  if (text.substr(at, kMistralTag.size()) == kMistralTag) at = skip_space(text, at + kMistralTag.size());
  if (at < text.size() && (text[at] == '[' || text[at] == '{')) {
    // The older form: JSON, its calls maybe split by more [TOOL_CALLS] tags.
    std::vector<ToolCallText> calls;
    std::size_t from = at;
    while (from < text.size()) {
      std::size_t next = text.find(kMistralTag, from);
      if (next == std::string_view::npos) next = text.size();
      auto some = read_json_calls(text.substr(from, next - from));
      if (!some) return std::nullopt;
      calls.insert(calls.end(), some->begin(), some->end());
      from = next == text.size() ? next : skip_space(text, next + kMistralTag.size());
    }
    return calls;
  }
  std::vector<ToolCallText> calls;
  while (at < text.size()) {
    std::size_t i = at;
    while (i < text.size() && is_name_char(text[i])) ++i;
    ToolCallText call{std::string(text.substr(at, i - at)), "", {}};
    if (!valid_tool_name(call.name)) return std::nullopt;
    if (text.substr(i, kCallIdTag.size()) == kCallIdTag) {
      i += kCallIdTag.size();
      const std::size_t id_end = text.find(kArgsTag, i);
      if (id_end == std::string_view::npos) return std::nullopt;
      call.id = std::string(trim_right(trim_left(text.substr(i, id_end - i))));
      i = id_end;
    }
    if (text.substr(i, kArgsTag.size()) != kArgsTag) return std::nullopt;
    i += kArgsTag.size();
    std::optional<Json> args = json_at(text, i);
    if (!args || !args->is_object()) return std::nullopt;
    call.arguments = dump_json(*args);
    calls.push_back(std::move(call));
    at = skip_space(text, i);
    if (text.substr(at, kMistralTag.size()) == kMistralTag) at = skip_space(text, at + kMistralTag.size());
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

std::optional<std::vector<ToolCallText>> read_glm_calls(std::string_view text, const ToolSignatures& tools) {
  std::vector<ToolCallText> calls;
  std::size_t at = skip_space(text, 0);
  while (at < text.size()) {
    if (text.substr(at, kGlmTurn.size()) == kGlmTurn) at += kGlmTurn.size();
    const std::size_t line_end = text.find('\n', at);
    if (line_end == std::string_view::npos) return std::nullopt;
    const std::string name(trim_right(text.substr(at, line_end - at)));
    if (!tools.may_call(name)) return std::nullopt;
    std::size_t i = line_end + 1;
    std::optional<Json> args = json_at(text, i);
    if (!args || !args->is_object()) return std::nullopt;
    calls.push_back({name, dump_json(*args), {}});
    at = skip_space(text, i);
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace folio::server
