#include "server/api/responses_api.h"

#include <fmt/format.h>

#include <optional>

#include "server/api/api_error.h"
#include "server/api/choice_reader.h"
#include "server/api/openai_response.h"
#include "server/api/structured_output.h"
#include "server/api/unix_time.h"
#include "server/http/http_message.h"

namespace folio::server {
namespace {

// A message item's content: a string, or input_text / output_text parts.
std::string content_text(const Json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_request("input", fmt::format("{}.content must be a string or an array of parts", where));
  std::string out;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const Json* type = part.is_object() ? field_of(part, "type") : nullptr;
    const Json* text = part.is_object() ? field_of(part, "text") : nullptr;
    if (type == nullptr || !type->is_string() || (*type != "input_text" && *type != "output_text" && *type != "text"))
      bad_request("input",
                  fmt::format("{}.content[{}]: only input_text and output_text parts are supported", where, i));
    if (text == nullptr || !text->is_string())
      bad_request("input", fmt::format("{}.content[{}].text must be a string", where, i));
    if (!out.empty()) out += '\n';
    out += text->get<std::string>();
  }
  return out;
}

std::string string_field(const Json& item, const char* name, const std::string& where) {
  const Json* v = field_of(item, name);
  if (v == nullptr || !v->is_string()) bad_request("input", fmt::format("{}.{} must be a string", where, name));
  return v->get<std::string>();
}

// The text of a reasoning item: its reasoning_text parts, in order ("" when
// it has none, as when only a summary was kept).
std::string reasoning_text(const Json& item, const std::string& where) {
  std::string text;
  const Json* content = field_of(item, "content");
  if (content == nullptr || content->is_null()) return text;
  if (!content->is_array()) bad_request("input", fmt::format("{}.content must be an array of parts", where));
  for (const Json& part : *content)
    if (part.is_object() && part.value("type", std::string()) == "reasoning_text") {
      const Json* t = field_of(part, "text");
      if (t == nullptr || !t->is_string()) bad_request("input", fmt::format("{}: a reasoning_text part needs text", where));
      text += t->get<std::string>();
    }
  return text;
}

// The input items as chat messages: function calls join the assistant turn
// before them, and a reasoning item becomes the reasoning of the assistant
// turn after it (gpt-oss's template keeps that of a turn that called a tool).
void read_input(const Json& input, std::vector<ChatMessage>& messages) {
  if (input.is_string()) {
    messages.push_back({"user", input.get<std::string>()});
    return;
  }
  if (!input.is_array() || input.empty()) bad_request("input", "input must be a string or a non-empty array of items");
  std::optional<std::string> reasoning;  // a reasoning item's, for the next assistant turn
  auto take_reasoning = [&reasoning](ChatMessage& assistant) {
    if (reasoning && !reasoning->empty()) assistant.reasoning = std::move(*reasoning);
    reasoning.reset();
  };
  for (std::size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!item.is_object()) bad_request("input", fmt::format("{} must be an object", where));
    const Json* type = field_of(item, "type");
    const std::string t = type != nullptr && type->is_string() ? type->get<std::string>() : "message";
    if (t == "message") {
      std::string role = string_field(item, "role", where);
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        bad_request("input", fmt::format("{}.role must be user, assistant, system or developer", where));
      if (role == "developer") role = "system";  // OpenAI's newer name for the system role
      const Json* content = field_of(item, "content");
      if (content == nullptr) bad_request("input", fmt::format("{}.content is required", where));
      messages.push_back({std::move(role), content_text(*content, where)});
      if (messages.back().role == "assistant") take_reasoning(messages.back());
    } else if (t == "function_call") {
      const std::string arguments = string_field(item, "arguments", where);
      std::optional<Json> parsed = parse_json(arguments);
      if (!parsed) bad_request("input", fmt::format("{}.arguments is not valid JSON (each key once)", where));
      Json call = {{"id", string_field(item, "call_id", where)},
                   {"type", "function"},
                   {"function", {{"name", string_field(item, "name", where)}, {"arguments", std::move(*parsed)}}}};
      ChatMessage* last = messages.empty() ? nullptr : &messages.back();
      if (last == nullptr || last->role != "assistant") {
        messages.push_back({"assistant", ""});
        last = &messages.back();
        last->content_null = true;
      }
      take_reasoning(*last);
      if (!last->fields.contains("tool_calls")) last->fields["tool_calls"] = Json::array();
      last->fields["tool_calls"].push_back(std::move(call));
    } else if (t == "function_call_output") {
      const Json* output = field_of(item, "output");
      if (output == nullptr) bad_request("input", fmt::format("{}.output is required", where));
      ChatMessage tool{"tool", content_text(*output, where + ".output")};
      tool.fields["tool_call_id"] = string_field(item, "call_id", where);
      messages.push_back(std::move(tool));
    } else if (t == "reasoning") {
      reasoning = reasoning_text(item, where);
    } else {
      bad_request("input", fmt::format("{}: items of type \"{}\" are not supported", where, printable(t, 64)));
    }
  }
}

// Function tools ({type, name, description, parameters}) in chat's shape, as chat templates take them.
Json chat_tools(const Json& tools) {
  if (!tools.is_array()) bad_request("tools", "tools must be an array of function tools");
  Json out = Json::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    if (!t.is_object() || t.value("type", std::string()) != "function")
      bad_request("tools", fmt::format("tools[{}]: only tools of type \"function\" are served", i));
    Json fn = Json::object();
    for (const char* key : {"name", "description", "parameters"})
      if (const Json* v = field_of(t, key)) fn[key] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

std::string item_id(const char* prefix) { return new_response_id(prefix); }

class ResponsesShape final : public AnswerShape {
 public:
  ResponsesShape(const GenerationJob& job, std::string model, std::string system_fingerprint, ResponseStore* store,
                 ResponseStorage storage, std::vector<ChatMessage> conversation)
      : model_(std::move(model)),
        system_fingerprint_(std::move(system_fingerprint)),
        store_(store),
        storage_(std::move(storage)),
        conversation_(std::move(conversation)),
        id_(item_id("resp_")),
        created_(unix_seconds()),
        max_tokens_(job.params.max_tokens),
        reader_(job) {}

  std::string opening_events() override {
    std::string out;
    Json r = response_json("in_progress");
    event(out, "response.created", {{"response", r}});
    event(out, "response.in_progress", {{"response", std::move(r)}});
    return out;
  }

  std::string delta_events(int, const CompletionDelta& delta) override {
    std::string out;
    for (OutputEvent& e : reader_.read(delta)) take(e, &out);
    if (delta.finish_reason) {
      close_item(&out);
      finish(*delta.finish_reason);
    }
    return out;
  }

  std::string error_event(int status, const std::string& message) override {
    std::string out;
    event(
        out, "error",
        {{"code", status >= 500 ? "server_error" : "invalid_request_error"}, {"message", message}, {"param", nullptr}});
    return out;
  }

  std::string closing_events(const Usage& usage) override {
    std::string out;
    close_item(&out);
    usage_ = usage;
    Json r = response_json(incomplete_ ? "incomplete" : "completed");
    keep(r);
    event(out, incomplete_ ? "response.incomplete" : "response.completed", {{"response", std::move(r)}});
    return out;
  }

  void add(int, const CompletionDelta& delta) override {
    for (OutputEvent& e : reader_.read(delta)) take(e, nullptr);
    if (delta.finish_reason) {
      close_item(nullptr);
      finish(*delta.finish_reason);
    }
  }

  std::string response(const Usage& usage) override {
    usage_ = usage;
    Json r = response_json(incomplete_ ? "incomplete" : "completed");
    keep(r);
    return dump_json(r);
  }

  std::vector<std::string> finish_reasons() const override { return {finish_}; }

 private:
  enum class Item { kNone, kReasoning, kMessage, kCall };

  // store: the finished response, with the conversation and this answer's
  // turn as a chat message (its text and calls; reasoning is dropped, as
  // templates drop it from the history).
  void keep(const Json& response) {
    if (store_ == nullptr) return;
    ChatMessage turn{"assistant", ""};
    bool has_text = false;
    for (const Json& item : output_) {
      if (item["type"] == "message") {
        turn.content += item["content"][0]["text"].get<std::string>();
        has_text = true;
      } else if (item["type"] == "function_call") {
        std::optional<Json> arguments = parse_json(item["arguments"].get<std::string>());
        if (!turn.fields.contains("tool_calls")) turn.fields["tool_calls"] = Json::array();
        turn.fields["tool_calls"].push_back(
            {{"id", item["call_id"]},
             {"type", "function"},
             {"function",
              {{"name", item["name"]}, {"arguments", arguments ? std::move(*arguments) : Json::object()}}}});
      }
    }
    turn.content_null = !has_text && turn.fields.contains("tool_calls");
    StoredResponse stored;
    stored.response = response;
    stored.conversation = std::move(conversation_);
    stored.conversation.push_back(std::move(turn));
    store_->put(id_, std::move(stored));
    store_ = nullptr;
  }

  void event(std::string& out, const char* type, Json fields) {
    Json e = {{"type", type}};
    for (auto& [key, value] : fields.items()) e[key] = std::move(value);
    e["sequence_number"] = sequence_++;
    out += fmt::format("event: {}\ndata: {}\n\n", type, dump_json(e));
  }

  void finish(FinishReason reason) {
    finish_ = reader_.finish_name(reason);
    incomplete_ = reason == FinishReason::kLength;
  }

  // Streams (out != nullptr) write events; both keep the output items.
  void take(OutputEvent& e, std::string* out) {
    switch (e.kind) {
      case OutputEvent::Kind::kReasoning:
        open_item(Item::kReasoning, out, {}, {});
        text_ += e.text;
        if (out) event(*out, "response.reasoning_text.delta", part_delta(e.text));
        break;
      case OutputEvent::Kind::kContent:
        open_item(Item::kMessage, out, {}, {});
        text_ += e.text;
        if (out) event(*out, "response.output_text.delta", part_delta(e.text));
        break;
      case OutputEvent::Kind::kCallStart:
        close_item(out);
        open_item(Item::kCall, out, e.id, e.text);
        break;
      case OutputEvent::Kind::kArguments:
        text_ += e.text;
        if (out)
          event(*out, "response.function_call_arguments.delta",
                {{"item_id", item_id_}, {"output_index", index()}, {"delta", e.text}});
        break;
    }
  }

  Json part_delta(const std::string& text) const {
    return {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0}, {"delta", text}};
  }

  int index() const { return static_cast<int>(output_.size()); }

  void open_item(Item kind, std::string* out, const std::string& call_id, const std::string& name) {
    if (open_ == kind && kind != Item::kCall) return;
    close_item(out);
    open_ = kind;
    text_.clear();
    call_id_ = call_id;
    name_ = name;
    item_id_ = item_id(kind == Item::kMessage ? "msg_" : kind == Item::kCall ? "fc_" : "rs_");
    if (out == nullptr) return;
    event(*out, "response.output_item.added", {{"output_index", index()}, {"item", item_json("in_progress")}});
    if (kind != Item::kCall)
      event(*out, "response.content_part.added",
            {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0}, {"part", part_json("")}});
  }

  void close_item(std::string* out) {
    if (open_ == Item::kNone) return;
    if (out != nullptr) {
      if (open_ == Item::kCall) {
        event(*out, "response.function_call_arguments.done",
              {{"item_id", item_id_}, {"output_index", index()}, {"arguments", text_}});
      } else {
        event(*out, open_ == Item::kMessage ? "response.output_text.done" : "response.reasoning_text.done",
              {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0}, {"text", text_}});
        event(*out, "response.content_part.done",
              {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0}, {"part", part_json(text_)}});
      }
      event(*out, "response.output_item.done", {{"output_index", index()}, {"item", item_json("completed")}});
    }
    output_.push_back(item_json("completed"));
    open_ = Item::kNone;
  }

  Json part_json(const std::string& text) const {
    if (open_ == Item::kReasoning) return {{"type", "reasoning_text"}, {"text", text}};
    return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
  }

  Json item_json(const char* status) const {
    const bool done = std::string_view(status) == "completed";
    switch (open_) {
      case Item::kReasoning:
        return {{"type", "reasoning"},
                {"id", item_id_},
                {"summary", Json::array()},
                {"content", done ? Json::array({part_json(text_)}) : Json::array()},
                {"status", status}};
      case Item::kCall:
        return {{"type", "function_call"},        {"id", item_id_},  {"call_id", call_id_}, {"name", name_},
                {"arguments", done ? text_ : ""}, {"status", status}};
      case Item::kMessage:
      case Item::kNone:
        break;
    }
    return {{"type", "message"},
            {"id", item_id_},
            {"status", status},
            {"role", "assistant"},
            {"content", done ? Json::array({part_json(text_)}) : Json::array()}};
  }

  Json response_json(const char* status) const {
    Json r = {
        {"id", id_},
        {"object", "response"},
        {"created_at", created_},
        {"status", status},
        {"error", nullptr},
        {"incomplete_details",
         std::string_view(status) == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr)},
        {"model", model_},
        {"system_fingerprint", system_fingerprint_.empty() ? Json(nullptr) : Json(system_fingerprint_)},
        {"output", std::string_view(status) == "in_progress" ? Json::array() : output_},
        {"parallel_tool_calls", true},
        {"tool_choice", "auto"},
        {"tools", Json::array()},
        {"max_output_tokens", max_tokens_ ? Json(*max_tokens_) : Json(nullptr)},
        {"previous_response_id", storage_.previous_response_id ? Json(*storage_.previous_response_id) : Json(nullptr)},
        {"store", storage_.store}};
    if (std::string_view(status) != "in_progress")
      r["usage"] = {{"input_tokens", usage_.prompt_tokens},
                    {"input_tokens_details", {{"cached_tokens", usage_.cached_tokens}}},
                    {"output_tokens", usage_.completion_tokens},
                    {"output_tokens_details", {{"reasoning_tokens", 0}}},
                    {"total_tokens", usage_.prompt_tokens + usage_.completion_tokens}};
    return r;
  }

  std::string model_;
  std::string system_fingerprint_;
  ResponseStore* store_;  // null: not stored (or stored already)
  ResponseStorage storage_;
  std::vector<ChatMessage> conversation_;
  std::string id_;
  std::int64_t created_;
  std::optional<int> max_tokens_;
  ChoiceReader reader_;
  Item open_ = Item::kNone;
  std::string item_id_, call_id_, name_, text_;  // the open item
  Json output_ = Json::array();  // the items done
  Usage usage_;
  std::string finish_;
  bool incomplete_ = false;
  std::int64_t sequence_ = 0;
};

}  // namespace

ChatRequest read_responses_request(const Json& body) {
  if (const Json* background = field_of(body, "background"); background != nullptr && *background == true)
    bad_request("background", "background responses are not supported");
  ChatRequest r;
  // The names the Responses API shares with chat (model, temperature, top_p,
  // stream, ...) and the server's extensions; it has no n.
  r.fields = read_request_fields(body);
  r.fields.sampling.n = 1;
  r.max_tokens = read_max_tokens(body, "max_output_tokens");
  r.fields.param_names["max_tokens"] = "max_output_tokens";
  if (const Json* reasoning = field_of(body, "reasoning"); reasoning != nullptr && !reasoning->is_null()) {
    if (!reasoning->is_object()) bad_request("reasoning", "reasoning must be an object ({\"effort\": \"low\"})");
    if (const Json* effort = field_of(*reasoning, "effort"); effort != nullptr && !effort->is_null()) {
      if (!effort->is_string()) bad_request("reasoning", "reasoning.effort must be a string");
      r.fields.reasoning_effort = effort->get<std::string>();
      r.fields.param_names["reasoning_effort"] = "reasoning";
    }
  }
  r.stop = read_stop(body, "stop");
  if (const Json* instructions = field_of(body, "instructions")) {
    if (!instructions->is_string()) bad_request("instructions", "instructions must be a string");
    r.messages.push_back({"system", instructions->get<std::string>()});
  }
  const Json* input = field_of(body, "input");
  if (input == nullptr) bad_request("input", "input is required: a string or an array of items");
  read_input(*input, r.messages);
  Json choice;
  if (const Json* c = field_of(body, "tool_choice")) {
    choice = c->is_object() && field_of(*c, "name") != nullptr
                 ? Json{{"type", "function"}, {"function", {{"name", (*c)["name"]}}}}
                 : *c;
  }
  std::optional<Json> tools;
  if (const Json* t = field_of(body, "tools")) tools = chat_tools(*t);
  r.tools = read_tools(tools ? &*tools : nullptr, choice.is_null() ? nullptr : &choice,
                       get_bool(body, "parallel_tool_calls"));
  if (const Json* text = field_of(body, "text")) {
    const Json* format = text->is_object() ? field_of(*text, "format") : nullptr;
    const Json* type = format != nullptr && format->is_object() ? field_of(*format, "type") : nullptr;
    std::optional<RequestedConstraint> asked;
    if (type != nullptr && *type == "json_object") {
      asked = RequestedConstraint{"text", {ConstraintSpec::Kind::kJsonObject, "", {}}};
    } else if (type != nullptr && *type == "json_schema") {
      const Json* schema = field_of(*format, "schema");
      if (schema == nullptr) bad_request("text", "text.format.schema is required for json_schema");
      asked = RequestedConstraint{"text", {ConstraintSpec::Kind::kJsonSchema, schema_text(*schema, "text"), {}}};
    } else if (type != nullptr && *type != "text") {
      bad_request("text", "text.format.type must be text, json_object or json_schema");
    }
    if (asked && r.fields.output_format)
      bad_request("text", fmt::format("text.format and {} both constrain the output; give only one",
                                      r.fields.output_format->param));
    if (asked) r.fields.output_format = std::move(asked);
  }
  r.add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  r.template_kwargs = read_template_kwargs(body);
  check_reasoning_effort(r.fields.reasoning_effort, "reasoning.effort");
  return r;
}

ResponseStorage read_response_storage(const Json& body) {
  ResponseStorage s;
  s.store = get_bool(body, "store").value_or(true);
  if (const Json* prev = field_of(body, "previous_response_id"); prev != nullptr && !prev->is_null()) {
    if (!prev->is_string() || prev->get<std::string>().empty())
      bad_request("previous_response_id", "previous_response_id must be a response's id (a string)");
    s.previous_response_id = prev->get<std::string>();
  }
  s.has_instructions = field_of(body, "instructions") != nullptr;
  return s;
}

std::shared_ptr<const StoredResponse> continue_stored(ResponseStore& store, const ResponseStorage& storage,
                                                      ChatRequest& request) {
  if (!storage.previous_response_id) return nullptr;
  const std::string& id = *storage.previous_response_id;
  ResponseStore::Lookup why = ResponseStore::Lookup::kUnknown;
  std::shared_ptr<const StoredResponse> previous = store.find(id, &why);
  if (!previous) {
    const std::string message =
        why == ResponseStore::Lookup::kEvicted
            ? fmt::format(
                  "Previous response with id '{}' was evicted: this server keeps its newest {} stored "
                  "responses (--max-stored-responses). Send the whole conversation in `input` instead",
                  printable(id, 128), store.max_responses())
            : fmt::format(
                  "Previous response with id '{}' not found: it was not stored on this server (store: "
                  "false, another server, or before a restart). Send the whole conversation in `input` "
                  "instead",
                  printable(id, 128));
    throw ApiError(400, message, "previous_response_id", "previous_response_not_found");
  }
  const auto at = request.messages.begin() + (storage.has_instructions ? 1 : 0);
  request.messages.insert(at, previous->conversation.begin(), previous->conversation.end());
  return previous;
}

std::unique_ptr<AnswerShape> make_responses_shape(const GenerationJob& job, const Tokenizer&,
                                                  const GenerationContext& context, ResponseStore* store,
                                                  ResponseStorage storage, std::vector<ChatMessage> conversation) {
  storage.store = storage.store && store != nullptr;
  return std::make_unique<ResponsesShape>(job, context.model_name, context.system_fingerprint,
                                          storage.store ? store : nullptr, std::move(storage), std::move(conversation));
}

}  // namespace folio::server
