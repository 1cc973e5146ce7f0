#include "server/anthropic_messages.h"

#include <fmt/format.h>

#include "server/choice_reader.h"
#include "server/openai_response.h"

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
void translate_message(const Json& m, std::size_t i, Json& out) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad_request("messages", fmt::format("{} must be an object with role and content", where));
  const Json* role = field_of(m, "role");
  if (role == nullptr || !role->is_string() || (*role != "user" && *role != "assistant"))
    bad_request("messages", fmt::format("{}.role must be \"user\" or \"assistant\"", where));
  const Json* content = field_of(m, "content");
  if (content == nullptr) bad_request("messages", fmt::format("{}.content is required", where));
  if (content->is_string()) {
    out.push_back({{"role", *role}, {"content", *content}});
    return;
  }
  if (!content->is_array())
    bad_request("messages", fmt::format("{}.content must be a string or content blocks", where));
  std::string text;
  Json calls = Json::array();
  for (std::size_t j = 0; j < content->size(); ++j) {
    const Json& b = (*content)[j];
    const std::string at = fmt::format("{}.content[{}]", where, j);
    const std::string type = block_type(b, at);
    if (type == "text") {
      if (!text.empty()) text += '\n';
      text += block_text(b, at);
    } else if (type == "tool_use" && *role == "assistant") {
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
    } else if (type == "tool_result" && *role == "user") {
      const Json* id = field_of(b, "tool_use_id");
      if (id == nullptr || !id->is_string())
        bad_request("messages", fmt::format("{}.tool_use_id must be a string", at));
      const Json* result = field_of(b, "content");
      std::string result_text = result ? text_of(*result, at + ".content", "messages") : std::string();
      if (const Json* e = field_of(b, "is_error"); e != nullptr && e->is_boolean() && e->get<bool>())
        result_text = "Error: " + result_text;
      out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", result_text}});
    } else if (type == "thinking" || type == "redacted_thinking") {
      // Earlier thinking: templates drop it from the history, and so do we.
    } else {
      bad_request("messages",
                  fmt::format("{}: content blocks of type \"{}\" are not supported{}", at, printable(type, 64),
                              type == "tool_use" || type == "tool_result" ? " in this role" : ""));
    }
  }
  if (!calls.empty()) {
    out.push_back(
        {{"role", "assistant"}, {"content", text.empty() ? Json(nullptr) : Json(text)}, {"tool_calls", calls}});
  } else if (!text.empty() || *role == "assistant") {
    out.push_back({{"role", *role}, {"content", text}});
  }
}

// Anthropic's tools ({name, description, input_schema}) as OpenAI's, in the order written.
ResponseJson translate_tools(const ResponseJson& tools) {
  if (!tools.is_array()) bad_request("tools", "tools must be an array of {name, description, input_schema}");
  ResponseJson out = ResponseJson::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const ResponseJson& t = tools[i];
    if (!t.is_object()) bad_request("tools", fmt::format("tools[{}] must be an object", i));
    if (auto type = t.find("type"); type != t.end() && !type->is_null() && *type != "custom")
      bad_request("tools", fmt::format("tools[{}]: server tools (type {}) are not supported; give name, description "
                                       "and input_schema",
                                       i, printable(type->dump(), 64)));
    ResponseJson fn = ResponseJson::object();
    if (auto name = t.find("name"); name != t.end()) fn["name"] = *name;
    if (auto d = t.find("description"); d != t.end()) fn["description"] = *d;
    if (auto schema = t.find("input_schema"); schema != t.end()) fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

Json translate_tool_choice(const Json& choice, Json& chat) {
  if (!choice.is_object()) bad_request("tool_choice", "tool_choice must be an object with a type");
  const Json* type = field_of(choice, "type");
  if (type == nullptr || !type->is_string())
    bad_request("tool_choice", "tool_choice.type must be auto, any, tool or none");
  if (const Json* p = field_of(choice, "disable_parallel_tool_use"); p != nullptr && p->is_boolean())
    chat["parallel_tool_calls"] = !p->get<bool>();
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

const char* stop_reason(const std::string& finish) {
  if (finish == "length") return "max_tokens";
  if (finish == "tool_calls") return "tool_use";
  return "end_turn";
}

void append_event(std::string& out, const char* name, const ResponseJson& data) {
  out += fmt::format("event: {}\ndata: {}\n\n", name, dump_json(data));
}

ResponseJson usage_json(const Usage& u) {
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
        id_(new_response_id("msg")),
        reader_(job) {}

  std::string opening_events() override {
    Usage start;
    start.prompt_tokens = prompt_tokens_;
    ResponseJson message = envelope();
    message["content"] = ResponseJson::array();
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
                     {{"type", "tool_use"}, {"id", e.id}, {"name", e.text}, {"input", ResponseJson::object()}},
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
          blocks_.push_back({Block::kToolUse, {{"type", "tool_use"}, {"id", e.id}, {"name", e.text}}, ""});
          break;
        case OutputEvent::Kind::kArguments:
          if (!blocks_.empty()) blocks_.back().arguments += e.text;
          break;
      }
    }
    if (delta.finish_reason) finished(delta);
  }

  std::string response(const Usage& usage) override {
    ResponseJson content = ResponseJson::array();
    for (Built& b : blocks_) {
      if (b.kind == Block::kToolUse) {
        std::optional<ResponseJson> input = parse_ordered(b.arguments.empty() ? "{}" : b.arguments);
        b.json["input"] = input && input->is_object() ? *input : ResponseJson::object();
      }
      if (b.kind == Block::kThinking) b.json["signature"] = "";
      content.push_back(std::move(b.json));
    }
    ResponseJson out = envelope();
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
    ResponseJson json;
    std::string arguments;  // tool_use: the input's JSON text as it came
  };

  ResponseJson envelope() const { return {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_}}; }

  void finished(const CompletionDelta& delta) {
    finish_ = reader_.finish_name(*delta.finish_reason);
    aborted_ = *delta.finish_reason == FinishReason::kAbort;
    if (!delta.stop_token && !delta.stop_reason.empty()) stop_sequence_ = delta.stop_reason;
  }

  ResponseJson stop_reason_json() const {
    if (finish_.empty() || aborted_) return nullptr;
    if (stop_sequence_ && finish_ == "stop") return "stop_sequence";
    return stop_reason(finish_);
  }

  ResponseJson stop_sequence_json() const {
    return stop_sequence_ ? ResponseJson(*stop_sequence_) : ResponseJson(nullptr);
  }

  void open_block(std::string& out, Block kind, ResponseJson start, bool always_new = false) {
    if (open_ == kind && !always_new) return;
    close_block(out);
    append_event(out, "content_block_start",
                 {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(start)}});
    open_ = kind;
  }

  void block_delta(std::string& out, ResponseJson delta) {
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
    ResponseJson& v = blocks_.back().json[key];
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

TranslatedRequest messages_to_chat(const Json& body, const ResponseJson& ordered) {
  TranslatedRequest t;
  Json& chat = t.body;
  // Fields the two APIs share, and the server's own extensions (structured
  // outputs, seed, min_p, ...), pass as they are; Anthropic's are translated.
  chat = body;
  for (const char* key : {"system", "messages", "stop_sequences", "tools", "tool_choice", "thinking", "metadata",
                          "stop", "max_completion_tokens", "functions"})
    chat.erase(key);
  if (const Json* n = field_of(body, "n"); n != nullptr && *n != 1)
    bad_request("n", "the Messages API gives one answer per request; leave n out");
  const Json* max_tokens = field_of(body, "max_tokens");
  if (max_tokens == nullptr) bad_request("max_tokens", "max_tokens is required: the most tokens the answer may have");
  chat["max_tokens"] = *max_tokens;
  if (const Json* stop = field_of(body, "stop_sequences")) chat["stop"] = *stop;
  Json messages = Json::array();
  if (const Json* system = field_of(body, "system"))
    messages.push_back({{"role", "system"}, {"content", text_of(*system, "system", "system")}});
  const Json* list = field_of(body, "messages");
  if (list == nullptr || !list->is_array() || list->empty())
    bad_request("messages", "messages must be a non-empty array of {role, content}");
  for (std::size_t i = 0; i < list->size(); ++i) translate_message((*list)[i], i, messages);
  chat["messages"] = std::move(messages);
  if (const ResponseJson* tools = ordered_at(ordered, {"tools"})) {
    ResponseJson converted = translate_tools(*tools);
    chat["tools"] = Json::parse(dump_json(converted));
    t.ordered["tools"] = std::move(converted);
  }
  if (const Json* choice = field_of(body, "tool_choice")) chat["tool_choice"] = translate_tool_choice(*choice, chat);
  if (const Json* thinking = field_of(body, "thinking"); thinking != nullptr && thinking->is_object()) {
    const Json* type = field_of(*thinking, "type");
    if (type != nullptr && type->is_string())
      chat["chat_template_kwargs"] = {{"enable_thinking", type->get<std::string>() == "enabled"}};
  }
  return t;
}

std::unique_ptr<AnswerShape> make_messages_shape(const GenerationJob& job, const Tokenizer&,
                                                 const std::string& model_name) {
  return std::make_unique<MessagesShape>(job, model_name);
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
  return dump_json(ResponseJson{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}});
}

}  // namespace folio::server
