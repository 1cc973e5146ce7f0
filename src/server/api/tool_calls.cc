#include "server/api/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "server/api/api_error.h"
#include "server/api/harmony_parser.h"
#include "server/api/tool_call_text.h"
#include "server/http/http_message.h"

namespace folio::server {
namespace {

constexpr std::size_t kMaxTools = 128;
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

bool has(std::string_view source, std::string_view text) { return source.find(text) != std::string_view::npos; }

Json tag(const std::string& begin, Json content, const std::string& end) {
  return Json{{"type", "tag"}, {"begin", begin}, {"content", std::move(content)}, {"end", end}};
}


// ---- Python-style arguments as a grammar -----------------------------------
// `key=value, ...` for one tool's parameters: required keys always, optional
// ones maybe, in the schema's order; each value a Python literal of the
// property's type (strings, numbers, True/False/None, lists of them, enums),
// any Python literal where the schema says more than that.

std::string ebnf_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}


// Numbers without exponents and of at most 18 digits: a random walk (or a
// small model) left free writes 1e999, which is no number JSON can carry.
constexpr std::string_view kPythonRules =
    "py_char ::= [^\"\\\\\\r\\n] | \"\\\\\" [\"\\\\/bfnrt']\n"
    "py_str ::= \"\\\"\" py_char* \"\\\"\"\n"
    "py_int ::= \"-\"? py_nat\n"
    "py_nat ::= \"0\" | [1-9] [0-9]{0,17}\n"
    "py_num ::= py_int (\".\" [0-9]{1,15})?\n"
    "py_any ::= py_str | py_num | \"True\" | \"False\" | \"None\" | \"[\" (py_any (\", \" py_any)*)? \"]\" | "
    "\"{\" (py_str \": \" py_any (\", \" py_str \": \" py_any)*)? \"}\"\n";

// A count bound of the schema (minLength, maxItems...); `fallback` when absent
// or past what a repetition in the grammar should hold.
std::int64_t bound(const Json& schema, const char* key, std::int64_t fallback) {
  auto it = schema.find(key);
  if (it == schema.end() || !it->is_number_integer()) return fallback;
  const std::int64_t v = it->get<std::int64_t>();
  return v < 0 || v > 1024 ? fallback : v;
}

// `item` repeated min to max times with ", " between (max < 0: no bound).
std::string repeated(const std::string& item, std::int64_t min, std::int64_t max) {
  const std::string more = max < 0 ? fmt::format("{{{},}}", std::max<std::int64_t>(min - 1, 0))
                                   : fmt::format("{{{},{}}}", std::max<std::int64_t>(min - 1, 0), max - 1);
  const std::string some = "(" + item + " (\", \" " + item + ")" + more + ")";
  if (max == 0) return "\"\"";
  return min > 0 ? some : "(" + some + ")?";
}

std::string python_value_rule(const Json& schema, int depth) {
  if (!schema.is_object() || depth > 8) return "py_any";
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array() && !e->empty()) {
    std::string out = "(";
    for (std::size_t i = 0; i < e->size(); ++i) out += (i ? " | " : "") + ebnf_string(python_literal((*e)[i]));
    return out + ")";
  }
  if (auto c = schema.find("const"); c != schema.end()) return ebnf_string(python_literal(*c));
  auto t = schema.find("type");
  if (t == schema.end() || !t->is_string()) return "py_any";
  const std::string type = t->get<std::string>();
  const bool non_negative = schema.contains("minimum") && schema["minimum"].is_number() &&
                            schema["minimum"].get<double>() >= 0;
  if (type == "string") {
    const std::int64_t min = bound(schema, "minLength", 0), max = bound(schema, "maxLength", -1);
    if (min == 0 && max < 0) return "py_str";
    return fmt::format("(\"\\\"\" py_char{{{},{}}} \"\\\"\")", min, max < 0 ? "" : std::to_string(max));
  }
  if (type == "integer") {
    // A small range is its numbers, each one; a wider one only its sign
    // (bounds the grammar does not hold are left to the tool).
    auto lo = schema.find("minimum"), hi = schema.find("maximum");
    if (lo != schema.end() && hi != schema.end() && lo->is_number_integer() && hi->is_number_integer() &&
        hi->get<std::int64_t>() >= lo->get<std::int64_t>() && hi->get<std::int64_t>() - lo->get<std::int64_t>() <= 256) {
      std::string out = "(";
      for (std::int64_t v = lo->get<std::int64_t>(); v <= hi->get<std::int64_t>(); ++v)
        out += (v == lo->get<std::int64_t>() ? "\"" : " | \"") + std::to_string(v) + "\"";
      return out + ")";
    }
    return non_negative ? "py_nat" : "py_int";
  }
  if (type == "number") return non_negative ? "(py_nat (\".\" [0-9]{1,15})?)" : "py_num";
  if (type == "boolean") return "(\"True\" | \"False\")";
  if (type == "null") return "\"None\"";
  if (type == "array") {
    const std::string item = python_value_rule(schema.value("items", Json::object()), depth + 1);
    return "(\"[\" " + repeated(item, bound(schema, "minItems", 0), bound(schema, "maxItems", -1)) + " \"]\")";
  }
  return "py_any";
}

// The EBNF of one tool's arguments, root rule `root`.
std::string pythonic_arguments_grammar(const Json& schema) {
  struct Param {
    std::string key, value;
    bool required;
  };
  std::vector<Param> params;
  if (auto props = schema.find("properties"); props != schema.end() && props->is_object()) {
    Json required = schema.value("required", Json::array());
    for (const auto& [key, sub] : props->items()) {
      const bool req = required.is_array() && std::find(required.begin(), required.end(), Json(key)) != required.end();
      params.push_back({key, python_value_rule(sub, 0), req});
    }
  }
  // head_i: the parameters from i on when none is written yet; tail_i: when
  // one is, so each written one after the first takes a ", " before it.
  std::string rules = "root ::= head_0\n";
  for (std::size_t i = 0; i <= params.size(); ++i) {
    if (i == params.size()) {
      rules += fmt::format("head_{} ::= \"\"\ntail_{} ::= \"\"\n", i, i);
      break;
    }
    const std::string p = ebnf_string(params[i].key + "=") + " " + params[i].value;
    rules += fmt::format("head_{} ::= {} tail_{}{}\n", i, p, i + 1,
                         params[i].required ? "" : fmt::format(" | head_{}", i + 1));
    rules += fmt::format("tail_{} ::= \", \" {} tail_{}{}\n", i, p, i + 1,
                         params[i].required ? "" : fmt::format(" | tail_{}", i + 1));
  }
  return rules + std::string(kPythonRules);
}

}  // namespace

ToolFormat tool_format_of(std::string_view source) {
  if (template_is_harmony(source)) return ToolFormat::kHarmony;
  if (has(source, "[TOOL_CALLS]")) return has(source, "[ARGS]") ? ToolFormat::kMistralArgs : ToolFormat::kMistral;
  if (has(source, "<function=") && has(source, "<parameter=")) return ToolFormat::kQwenXml;
  if (has(source, kCallOpen)) return ToolFormat::kHermes;
  if (has(source, "<|tool_call|>")) return ToolFormat::kGranite;
  if (has(source, "<|tool|>") && has(source, "<|/tool|>")) return ToolFormat::kPhi4Mini;
  if (has(source, "[func_name1(")) return ToolFormat::kPythonic;
  if (has(source, "<|observation|>") && has(source, "metadata")) return ToolFormat::kGlm4;
  if (has(source, "<|python_tag|>") || has(source, "<|python_start|>") ||
      (has(source, "tools") && has(source, "\"parameters\"")))
    return ToolFormat::kLlama3;
  return ToolFormat::kGeneric;
}

const char* tool_format_name(ToolFormat format) {
  switch (format) {
    case ToolFormat::kHermes: return "hermes";
    case ToolFormat::kQwenXml: return "qwen3-coder xml";
    case ToolFormat::kMistral: return "mistral json";
    case ToolFormat::kMistralArgs: return "mistral [ARGS]";
    case ToolFormat::kLlama3: return "llama 3 json";
    case ToolFormat::kPythonic: return "pythonic";
    case ToolFormat::kGranite: return "granite";
    case ToolFormat::kPhi4Mini: return "phi-4-mini";
    case ToolFormat::kGlm4: return "glm-4";
    case ToolFormat::kGeneric: return "generic (hermes, described by folio)";
    case ToolFormat::kHarmony: return "harmony";
  }
  return "generic";
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
    if (name == fn->end() || !name->is_string() || !valid_tool_name(name->get_ref<const std::string&>()))
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


Json tool_arguments_format(const Json& schema) {
  // One white-space character at a time: a small model left free spends its
  // tokens on indentation.
  return Json{{"type", "json_schema"}, {"json_schema", schema}, {"max_whitespace_cnt", 1}};
}

std::optional<ConstraintSpec> tool_constraint(const ToolRequest& tools, ToolFormat format, Thinking thinking) {
  if (tools.choice == ToolRequest::Choice::kNone || format == ToolFormat::kHarmony) return std::nullopt;
  const bool forced = tools.choice != ToolRequest::Choice::kAuto;
  // auto: free text, and a call from its opening tag on where that tag is
  // text the grammar can see. Formats whose call opens with a control token,
  // or with no tag of its own, stay free; their calls are still read.
  const bool tagged = format == ToolFormat::kHermes || format == ToolFormat::kGeneric ||
                      format == ToolFormat::kQwenXml;
  if (!forced && !tagged) return std::nullopt;
  Json tags = Json::array();
  for (std::size_t i = 0; i < tools.names.size(); ++i) {
    if (tools.choice == ToolRequest::Choice::kFunction && tools.names[i] != tools.function) continue;
    const std::string& name = tools.names[i];  // valid_tool_name: nothing to escape
    const Json& schema = tools.parameters[i];
    switch (format) {
      case ToolFormat::kHermes:
      case ToolFormat::kGeneric:
        tags.push_back(tag(fmt::format("{}\n{{\"name\": \"{}\", \"arguments\": ", kCallOpen, name),
                           tool_arguments_format(schema), fmt::format("}}\n{}", kCallClose)));
        break;
      case ToolFormat::kQwenXml:
        tags.push_back(tag(fmt::format("{}\n<function={}>\n", kCallOpen, name),
                           Json{{"type", "qwen_xml_parameter"}, {"json_schema", schema}, {"max_whitespace_cnt", 1}},
                           fmt::format("</function>\n{}", kCallClose)));
        break;
      // The control tokens that open these calls ([TOOL_CALLS], <|tool_call|>)
      // have no text the grammar could write: it starts after them.
      case ToolFormat::kMistral:
      case ToolFormat::kGranite:
      case ToolFormat::kPhi4Mini:
        tags.push_back(tag(fmt::format("{{\"name\": \"{}\", \"arguments\": ", name), tool_arguments_format(schema), "}"));
        break;
      case ToolFormat::kMistralArgs:
        tags.push_back(tag(name + "[ARGS]", tool_arguments_format(schema), ""));
        break;
      case ToolFormat::kLlama3:
        tags.push_back(tag(fmt::format("{{\"name\": \"{}\", \"parameters\": ", name), tool_arguments_format(schema), "}"));
        break;
      case ToolFormat::kPythonic:
        tags.push_back(
            tag(name + "(", Json{{"type", "grammar"}, {"grammar", pythonic_arguments_grammar(schema)}}, ")"));
        break;
      case ToolFormat::kGlm4:
        tags.push_back(tag(name + "\n", tool_arguments_format(schema), ""));
        break;
      case ToolFormat::kHarmony:
        break;
    }
  }
  Json format_json;
  if (forced) {
    std::string separator = "\n";
    bool bracketed = false;
    switch (format) {
      case ToolFormat::kMistral:
      case ToolFormat::kGranite:
      case ToolFormat::kPhi4Mini:
      case ToolFormat::kPythonic:
        separator = ", ";
        bracketed = true;
        break;
      case ToolFormat::kMistralArgs: separator = "[TOOL_CALLS]"; break;
      case ToolFormat::kLlama3: separator = "; "; break;
      default: break;
    }
    Json calls = {{"type", "tags_with_separator"},
                  {"tags", std::move(tags)},
                  {"separator", separator},
                  {"at_least_one", true},
                  {"stop_after_first", !tools.parallel}};
    format_json = bracketed ? Json{{"type", "sequence"},
                                   {"elements", Json::array({{{"type", "const_string"}, {"value", "["}},
                                                             std::move(calls),
                                                             {{"type", "const_string"}, {"value", "]"}}})}}
                            : std::move(calls);
    if (thinking != Thinking::kNone) {
      // Models put a blank line or two after </think>.
      Json thought = Json{{"type", "tag"},
                          {"begin", thinking == Thinking::kOpen ? "" : "<think>"},
                          {"content", {{"type", "any_text"}}},
                          {"end", Json::array({"</think>", "</think>\n", "</think>\n\n"})}};
      if (thinking == Thinking::kMayOpen) thought = Json{{"type", "optional"}, {"content", std::move(thought)}};
      format_json = Json{{"type", "sequence"}, {"elements", Json::array({std::move(thought), std::move(format_json)})}};
    }
  } else {
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

std::string new_tool_call_id(ToolFormat format) {
  static const std::uint64_t nonce = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<std::uint64_t> counter{0};
  const std::uint64_t n = counter.fetch_add(1);
  if (!mistral_ids(format)) return fmt::format("call_{:016x}{:08x}", nonce, n & 0xFFFFFFFFu);
  // 9 base-62 digits: n times a prime (coprime with 62^9) plus the nonce, so
  // no two of the first 62^9 ids of a run are alike.
  constexpr std::uint64_t kSpace = 13537086546263552ull;  // 62^9
  constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::uint64_t product = 0;  // (n * 1000000007) mod 62^9, added up bit by bit: no term overflows
  for (std::uint64_t a = n % kSpace, b = 1000000007ull; b != 0; b >>= 1, a = (a * 2) % kSpace)
    if (b & 1) product = (product + a) % kSpace;
  std::uint64_t x = (nonce % kSpace + product) % kSpace;
  std::string id(9, '0');
  for (int i = 8; i >= 0; --i, x /= 62) id[static_cast<std::size_t>(i)] = kDigits[x % 62];
  return id;
}

}  // namespace folio::server
