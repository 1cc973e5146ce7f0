#include "server/api/anthropic_messages.h"

#include <fmt/format.h>

#include <limits>

#include "server/api/choice_reader.h"
#include "server/api/openai_response.h"
#include "server/http/http_message.h"

namespace folio::server {
namespace {

// A text block's text; any other block is refused by the caller's rules.
std::string block_text(const Json& block, const std::string& where) {
  const Json* text = field_of(block, "text");
  if (text == nullptr || !text->is_string()) bad_request("messages", fmt::format("{}.text must be a string", where));
  return text->get<std::string>();
}

std::string block_type(const Json& block, const std::string& where) {
  if (!block.is_object()) bad_request("messages", fmt::format("{} must be a content block (an object)", where));
  const Json* type = field_of(block, "type");
  if (type == nullptr || !type->is_string()) bad_request("messages", fmt::format("{}.type must be a string", where));
  return type->get<std::string>();
}

// A string, or text blocks joined (system prompts, tool results).
std::string text_of(const Json& v, const std::string& where, const char* param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad_request(param, fmt::format("{} must be a string or an array of text blocks", where));
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string at = fmt::format("{}[{}]", where, i);
    const std::string type = block_type(v[i], at);
    if (type != "text")
      bad_request(param, fmt::format("{}: only text blocks are supported here, got \"{}\"", at, printable(type, 64)));
    if (!out.empty()) out += '\n';
    out += block_text(v[i], at);
  }
  return out;
}

// One Anthropic message as one or more chat messages.
void read_message(const Json& m, std::size_t i, std::vector<ChatMessage>& out) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad_request("messages", fmt::format("{} must be an object with role and content", where));
  const Json* role_field = field_of(m, "role");
  if (role_field == nullptr || !role_field->is_string() || (*role_field != "user" && *role_field != "assistant"))
    bad_request("messages", fmt::format("{}.role must be \"user\" or \"assistant\"", where));
  const std::string role = role_field->get<std::string>();
  const Json* content = field_of(m, "content");
  if (content == nullptr) bad_request("messages", fmt::format("{}.content is required", where));
  if (content->is_string()) {
    out.push_back({role, content->get<std::string>()});
    return;
  }
  if (!content->is_array())
    bad_request("messages", fmt::format("{}.content must be a string or content blocks", where));
  std::string text, thinking;
  Json calls = Json::array();
  for (std::size_t j = 0; j < content->size(); ++j) {
    const Json& b = (*content)[j];
    const std::string at = fmt::format("{}.content[{}]", where, j);
    const std::string type = block_type(b, at);
    if (type == "text") {
      if (!text.empty()) text += '\n';
      text += block_text(b, at);
    } else if (type == "tool_use" && role == "assistant") {
      const Json* id = field_of(b, "id");
      const Json* name = field_of(b, "name");
      const Json* input = field_of(b, "input");
      if (id == nullptr || !id->is_string() || name == nullptr || !name->is_string())
        bad_request("messages", fmt::format("{}: a tool_use block needs a string id and name", at));
      if (input != nullptr && !input->is_object())
        bad_request("messages", fmt::format("{}.input must be an object", at));
      calls.push_back({{"id", *id},
                       {"type", "function"},
                       {"function", {{"name", *name}, {"arguments", input ? *input : Json::object()}}}});
    } else if (type == "tool_result" && role == "user") {
      const Json* id = field_of(b, "tool_use_id");
      if (id == nullptr || !id->is_string())
        bad_request("messages", fmt::format("{}.tool_use_id must be a string", at));
      const Json* result = field_of(b, "content");
      std::string result_text = result ? text_of(*result, at + ".content", "messages") : std::string();
      if (const Json* e = field_of(b, "is_error"); e != nullptr && e->is_boolean() && e->get<bool>())
        result_text = "Error: " + result_text;
      ChatMessage tool{"tool", std::move(result_text)};
      tool.fields["tool_call_id"] = *id;
      out.push_back(std::move(tool));
    } else if (type == "thinking" && role == "assistant") {
      // Earlier thinking: the reasoning of this turn (gpt-oss's template
      // keeps that of a turn that called a tool).
      const Json* t = field_of(b, "thinking");
      if (t == nullptr || !t->is_string())
        bad_request("messages", fmt::format("{}: a thinking block needs a string thinking", at));
      thinking += t->get<std::string>();
    } else if (type == "thinking" || type == "redacted_thinking") {
      // Encrypted (redacted) thinking means nothing here; dropped.
    } else {
      bad_request("messages",
                  fmt::format("{}: content blocks of type \"{}\" are not supported{}", at, printable(type, 64),
                              type == "tool_use" || type == "tool_result" ? " in this role" : ""));
    }
  }
  if (!calls.empty()) {
    ChatMessage assistant{"assistant", text};
    assistant.content_null = text.empty();
    assistant.fields["tool_calls"] = std::move(calls);
    if (!thinking.empty()) assistant.reasoning = std::move(thinking);
    out.push_back(std::move(assistant));
  } else if (!text.empty() || role == "assistant") {
    out.push_back({role, std::move(text)});
    if (!thinking.empty()) out.back().reasoning = std::move(thinking);
  }
}

// Anthropic's tools ({name, description, input_schema}) in OpenAI's shape, as chat templates take them.
Json chat_tools(const Json& tools) {
  if (!tools.is_array()) bad_request("tools", "tools must be an array of {name, description, input_schema}");
  Json out = Json::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    if (!t.is_object()) bad_request("tools", fmt::format("tools[{}] must be an object", i));
    if (const Json* type = field_of(t, "type"); type != nullptr && *type != "custom")
      bad_request("tools", fmt::format("tools[{}]: server tools (type {}) are not supported; give name, description "
                                       "and input_schema",
                                       i, printable(type->dump(), 64)));
    static constexpr std::pair<const char*, const char*> kNames[] = {
        {"name", "name"}, {"description", "description"}, {"input_schema", "parameters"}};
    Json fn = Json::object();
    for (const auto& [from, to] : kNames)
      if (auto v = t.find(from); v != t.end()) fn[to] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// Anthropic's tool_choice in OpenAI's chat shape; `parallel` from disable_parallel_tool_use.
Json chat_tool_choice(const Json& choice, std::optional<bool>& parallel) {
  if (!choice.is_object()) bad_request("tool_choice", "tool_choice must be an object with a type");
  const Json* type = field_of(choice, "type");
  if (type == nullptr || !type->is_string())
    bad_request("tool_choice", "tool_choice.type must be auto, any, tool or none");
  if (const Json* p = field_of(choice, "disable_parallel_tool_use"); p != nullptr && p->is_boolean())
    parallel = !p->get<bool>();
  const std::string t = type->get<std::string>();
  if (t == "auto") return "auto";
  if (t == "any") return "required";
  if (t == "none") return "none";
  if (t == "tool") {
    const Json* name = field_of(choice, "name");
    if (name == nullptr || !name->is_string()) bad_request("tool_choice", "tool_choice of type tool needs a name");
    return {{"type", "function"}, {"function", {{"name", *name}}}};
  }
  bad_request("tool_choice", fmt::format("tool_choice.type \"{}\" is not auto, any, tool or none", printable(t, 64)));
}

// Anthropic's structured outputs: output_config.format (what the client's
// messages.parse(output_format=...) sends) or the beta's top-level
// output_format, {"type": "json_schema", "schema": {...}}.
std::optional<RequestedConstraint> output_format(const Json& body) {
  const Json* format = nullptr;
  std::string param;
  if (const Json* config = get_object(body, "output_config")) {
    format = field_of(*config, "format");
    param = "output_config.format";
  }
  if (const Json* beta = field_of(body, "output_format")) {
    if (format != nullptr)
      bad_request("output_format", "output_format and output_config.format both give the format; give one");
    format = beta;
    param = "output_format";
  }
  if (format == nullptr) return std::nullopt;
  const Json* type = format->is_object() ? field_of(*format, "type") : nullptr;
  if (type == nullptr || *type != "json_schema")
    bad_request(param, fmt::format("{} must be {{\"type\": \"json_schema\", \"schema\": {{...}}}}: JSON schemas are the "
                                   "output formats served",
                                   param));
  const Json* schema = field_of(*format, "schema");
  if (schema == nullptr) bad_request(param, fmt::format("{}.schema is missing: give the JSON schema the answer must follow", param));
  return RequestedConstraint{param, {ConstraintSpec::Kind::kJsonSchema, schema_text(*schema, param + ".schema"), {}}};
}

const char* stop_reason(const std::string& finish) {
  if (finish == "length") return "max_tokens";
  if (finish == "tool_calls") return "tool_use";
  return "end_turn";
}

void append_event(std::string& out, const char* name, const Json& data) {
  out += fmt::format("event: {}\ndata: {}\n\n", name, dump_json(data));
}

// A call's id as Anthropic spells it (toolu_...); the reader names calls as OpenAI does (call_...).
std::string tool_use_id(const std::string& call_id) {
  constexpr std::string_view kOpenAi = "call_";
  if (call_id.rfind(kOpenAi, 0) == 0) return "toolu_" + call_id.substr(kOpenAi.size());
  return call_id;
}

Json usage_json(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens", u.completion_tokens}};
}

// The whole answer in content blocks, or the events of a stream.
class MessagesShape final : public AnswerShape {
 public:
  MessagesShape(const GenerationJob& job, std::string model)
      : prompt_tokens_(static_cast<std::int64_t>(job.prompts.at(0).size())),
        model_(std::move(model)),
        id_(new_response_id("msg_")),
        reader_(job) {}

  std::string opening_events() override {
    Usage start;
    start.prompt_tokens = prompt_tokens_;
    Json message = envelope();
    message["content"] = Json::array();
    message["stop_reason"] = nullptr;
    message["stop_sequence"] = nullptr;
    message["usage"] = usage_json(start);
    std::string out;
    append_event(out, "message_start", {{"type", "message_start"}, {"message", std::move(message)}});
    return out;
  }

  std::string delta_events(int, const CompletionDelta& delta) override {
    std::string out;
    for (const OutputEvent& e : reader_.read(delta)) {
      switch (e.kind) {
        case OutputEvent::Kind::kContent:
          open_block(out, Block::kText, {{"type", "text"}, {"text", ""}});
          block_delta(out, {{"type", "text_delta"}, {"text", e.text}});
          break;
        case OutputEvent::Kind::kReasoning:
          open_block(out, Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
          block_delta(out, {{"type", "thinking_delta"}, {"thinking", e.text}});
          break;
        case OutputEvent::Kind::kCallStart:
          open_block(out, Block::kToolUse,
                     {{"type", "tool_use"}, {"id", tool_use_id(e.id)}, {"name", e.text}, {"input", Json::object()}},
                     /*always_new=*/true);
          break;
        case OutputEvent::Kind::kArguments:
          block_delta(out, {{"type", "input_json_delta"}, {"partial_json", e.text}});
          break;
      }
    }
    if (delta.finish_reason) {
      close_block(out);
      finished(delta);
    }
    return out;
  }

  std::string error_event(int status, const std::string& message) override {
    std::string out = "event: error\ndata: " + anthropic_error_body(status, message) + "\n\n";
    return out;
  }

  std::string closing_events(const Usage& usage) override {
    std::string out;
    close_block(out);
    append_event(out, "message_delta",
                 {{"type", "message_delta"},
                  {"delta", {{"stop_reason", stop_reason_json()}, {"stop_sequence", stop_sequence_json()}}},
                  {"usage", usage_json(usage)}});
    append_event(out, "message_stop", {{"type", "message_stop"}});
    return out;
  }

  void add(int, const CompletionDelta& delta) override {
    for (OutputEvent& e : reader_.read(delta)) {
      switch (e.kind) {
        case OutputEvent::Kind::kContent:
          append_text(Block::kText, "text", e.text);
          break;
        case OutputEvent::Kind::kReasoning:
          append_text(Block::kThinking, "thinking", e.text);
          break;
        case OutputEvent::Kind::kCallStart:
          blocks_.push_back({Block::kToolUse, {{"type", "tool_use"}, {"id", tool_use_id(e.id)}, {"name", e.text}}, ""});
          break;
        case OutputEvent::Kind::kArguments:
          if (!blocks_.empty()) blocks_.back().arguments += e.text;
          break;
      }
    }
    if (delta.finish_reason) finished(delta);
  }

  std::string response(const Usage& usage) override {
    Json content = Json::array();
    for (Built& b : blocks_) {
      if (b.kind == Block::kToolUse) {
        std::optional<Json> input = parse_json(b.arguments.empty() ? "{}" : b.arguments);
        b.json["input"] = input && input->is_object() ? *input : Json::object();
      }
      if (b.kind == Block::kThinking) b.json["signature"] = "";
      content.push_back(std::move(b.json));
    }
    Json out = envelope();
    out["content"] = std::move(content);
    out["stop_reason"] = stop_reason_json();
    out["stop_sequence"] = stop_sequence_json();
    out["usage"] = usage_json(usage);
    return dump_json(out);
  }

  std::vector<std::string> finish_reasons() const override { return {aborted_ ? "abort" : finish_}; }

 private:
  enum class Block { kNone, kText, kThinking, kToolUse };
  struct Built {
    Block kind;
    Json json;
    std::string arguments;  // tool_use: the input's JSON text as it came
  };

  Json envelope() const { return {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_}}; }

  void finished(const CompletionDelta& delta) {
    finish_ = reader_.finish_name(*delta.finish_reason);
    aborted_ = *delta.finish_reason == FinishReason::kAbort;
    if (!delta.stop_token && !delta.stop_reason.empty()) stop_sequence_ = delta.stop_reason;
  }

  Json stop_reason_json() const {
    if (finish_.empty() || aborted_) return nullptr;
    if (stop_sequence_ && finish_ == "stop") return "stop_sequence";
    return stop_reason(finish_);
  }

  Json stop_sequence_json() const {
    return stop_sequence_ ? Json(*stop_sequence_) : Json(nullptr);
  }

  void open_block(std::string& out, Block kind, Json start, bool always_new = false) {
    if (open_ == kind && !always_new) return;
    close_block(out);
    append_event(out, "content_block_start",
                 {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(start)}});
    open_ = kind;
  }

  void block_delta(std::string& out, Json delta) {
    append_event(out, "content_block_delta",
                 {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  }

  void close_block(std::string& out) {
    if (open_ == Block::kNone) return;
    append_event(out, "content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_ = Block::kNone;
    ++index_;
  }

  void append_text(Block kind, const char* key, const std::string& text) {
    if (blocks_.empty() || blocks_.back().kind != kind) blocks_.push_back({kind, {{"type", key}, {key, ""}}, ""});
    Json& v = blocks_.back().json[key];
    v = v.get<std::string>() + text;
  }

  std::int64_t prompt_tokens_;
  std::string model_;
  std::string id_;
  ChoiceReader reader_;
  Block open_ = Block::kNone;  // streaming: the block being written
  int index_ = 0;              // streaming: its index
  std::vector<Built> blocks_;  // not streaming
  std::string finish_;
  bool aborted_ = false;
  std::optional<std::string> stop_sequence_;  // the stop sequence that ended it
};

}  // namespace

ChatRequest read_messages_request(const Json& body, bool count_only) {
  ChatRequest r;
  // The names Anthropic shares with OpenAI (model, temperature, top_p, top_k,
  // stream) and the server's extensions (structured outputs, seed, min_p, ...).
  r.fields = read_request_fields(body);
  if (std::optional<RequestedConstraint> format = output_format(body)) {
    if (r.fields.output_format)
      bad_request(format->param, fmt::format("{} and {} both constrain the output; give only one", format->param,
                                             r.fields.output_format->param));
    r.fields.output_format = std::move(format);
  }
  if (field_of(body, "n") != nullptr && r.fields.sampling.n != 1)
    bad_request("n", "the Messages API gives one answer per request; leave n out");
  r.max_tokens = read_max_tokens(body, "max_tokens");
  if (!r.max_tokens && !count_only)
    bad_request("max_tokens", "max_tokens is required: the most tokens the answer may have");
  r.stop = read_stop(body, "stop_sequences");
  r.fields.param_names["stop"] = "stop_sequences";
  if (const Json* system = field_of(body, "system"))
    r.messages.push_back({"system", text_of(*system, "system", "system")});
  const Json* list = field_of(body, "messages");
  if (list == nullptr || !list->is_array() || list->empty())
    bad_request("messages", "messages must be a non-empty array of {role, content}");
  for (std::size_t i = 0; i < list->size(); ++i) read_message((*list)[i], i, r.messages);
  std::optional<bool> parallel;
  Json choice;
  if (const Json* c = field_of(body, "tool_choice")) choice = chat_tool_choice(*c, parallel);
  std::optional<Json> tools;
  if (const Json* t = field_of(body, "tools")) tools = chat_tools(*t);
  r.tools = read_tools(tools ? &*tools : nullptr, choice.is_null() ? nullptr : &choice, parallel);
  r.add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  r.template_kwargs = read_template_kwargs(body);
  if (const Json* thinking = field_of(body, "thinking"); thinking != nullptr && thinking->is_object()) {
    const Json* type = field_of(*thinking, "type");
    if (type != nullptr && type->is_string()) {
      const bool enabled = type->get<std::string>() == "enabled";
      if (!r.template_kwargs) r.template_kwargs = Json::object();
      if (!r.template_kwargs->contains("enable_thinking")) (*r.template_kwargs)["enable_thinking"] = enabled;
      // budget_tokens: the thinking's bound, forced as max_reasoning_tokens is.
      if (const Json* budget = field_of(*thinking, "budget_tokens"); enabled && budget != nullptr) {
        if (!budget->is_number_integer() || budget->get<std::int64_t>() < 0 ||
            budget->get<std::int64_t>() > std::numeric_limits<int>::max())
          bad_request("thinking", "thinking.budget_tokens must be a whole number of tokens, >= 0");
        r.fields.max_reasoning_tokens = budget->get<int>();
        r.fields.param_names["max_reasoning_tokens"] = "thinking";
      }
    }
  }
  return r;
}

std::unique_ptr<AnswerShape> make_messages_shape(const GenerationJob& job, const Tokenizer&,
                                                 const GenerationContext& context) {
  return std::make_unique<MessagesShape>(job, context.model_name);
}

std::string anthropic_error_body(int status, const std::string& message) {
  const char* type = "api_error";
  switch (status) {
    case 400:
      type = "invalid_request_error";
      break;
    case 401:
      type = "authentication_error";
      break;
    case 403:
      type = "permission_error";
      break;
    case 404:
      type = "not_found_error";
      break;
    case 413:
      type = "request_too_large";
      break;
    case 429:
      type = "rate_limit_error";
      break;
    case 503:
      type = "overloaded_error";
      break;
    default:
      break;
  }
  return dump_json(Json{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

}  // namespace folio::server
