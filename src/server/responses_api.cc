#include "server/responses_api.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/choice_reader.h"
#include "server/http_message.h"
#include "server/openai_response.h"
#include "server/unix_time.h"

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

// The input items as chat messages: function calls join the assistant turn before them.
void translate_input(const Json& input, Json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array() || input.empty()) bad_request("input", "input must be a string or a non-empty array of items");
  for (std::size_t i = 0; i < input.size(); ++i) {
    const Json& item = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!item.is_object()) bad_request("input", fmt::format("{} must be an object", where));
    const Json* type = field_of(item, "type");
    const std::string t = type != nullptr && type->is_string() ? type->get<std::string>() : "message";
    if (t == "message") {
      const std::string role = string_field(item, "role", where);
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        bad_request("input", fmt::format("{}.role must be user, assistant, system or developer", where));
      const Json* content = field_of(item, "content");
      if (content == nullptr) bad_request("input", fmt::format("{}.content is required", where));
      messages.push_back({{"role", role}, {"content", content_text(*content, where)}});
    } else if (t == "function_call") {
      Json call = {
          {"id", string_field(item, "call_id", where)},
          {"type", "function"},
          {"function",
           {{"name", string_field(item, "name", where)}, {"arguments", string_field(item, "arguments", where)}}}};
      Json* last = messages.empty() ? nullptr : &messages.back();
      if (last != nullptr && (*last)["role"] == "assistant" && last->contains("tool_calls")) {
        (*last)["tool_calls"].push_back(std::move(call));
      } else if (last != nullptr && (*last)["role"] == "assistant") {
        (*last)["tool_calls"] = Json::array({std::move(call)});
      } else {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({call})}});
      }
    } else if (t == "function_call_output") {
      const Json* output = field_of(item, "output");
      if (output == nullptr) bad_request("input", fmt::format("{}.output is required", where));
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", string_field(item, "call_id", where)},
                          {"content", content_text(*output, where + ".output")}});
    } else if (t == "reasoning") {
      // Earlier reasoning: templates drop it from the history, and so do we.
    } else {
      bad_request("input", fmt::format("{}: items of type \"{}\" are not supported", where, printable(t, 64)));
    }
  }
}

// Function tools ({type, name, description, parameters}) as chat's, in the order written.
ResponseJson translate_tools(const ResponseJson& tools) {
  if (!tools.is_array()) bad_request("tools", "tools must be an array of function tools");
  ResponseJson out = ResponseJson::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const ResponseJson& t = tools[i];
    if (!t.is_object() || t.value("type", std::string()) != "function")
      bad_request("tools", fmt::format("tools[{}]: only tools of type \"function\" are served", i));
    ResponseJson fn = ResponseJson::object();
    for (const char* key : {"name", "description", "parameters"})
      if (auto v = t.find(key); v != t.end() && !v->is_null()) fn[key] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

std::string item_id(const char* prefix) { return new_response_id(prefix); }

class ResponsesShape final : public AnswerShape {
 public:
  ResponsesShape(const GenerationJob& job, std::string model)
      : model_(std::move(model)),
        id_(item_id("resp")),
        created_(unix_seconds()),
        max_tokens_(job.params.max_tokens),
        reader_(job) {}

  std::string opening_events() override {
    std::string out;
    ResponseJson r = response_json("in_progress");
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
    event(out, incomplete_ ? "response.incomplete" : "response.completed",
          {{"response", response_json(incomplete_ ? "incomplete" : "completed")}});
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
    return dump_json(response_json(incomplete_ ? "incomplete" : "completed"));
  }

  std::vector<std::string> finish_reasons() const override { return {finish_}; }

 private:
  enum class Item { kNone, kReasoning, kMessage, kCall };

  void event(std::string& out, const char* type, ResponseJson fields) {
    ResponseJson e = {{"type", type}};
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

  ResponseJson part_delta(const std::string& text) const {
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
    item_id_ = item_id(kind == Item::kMessage ? "msg" : kind == Item::kCall ? "fc" : "rs");
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

  ResponseJson part_json(const std::string& text) const {
    if (open_ == Item::kReasoning) return {{"type", "reasoning_text"}, {"text", text}};
    return {{"type", "output_text"}, {"text", text}, {"annotations", ResponseJson::array()}};
  }

  ResponseJson item_json(const char* status) const {
    const bool done = std::string_view(status) == "completed";
    switch (open_) {
      case Item::kReasoning:
        return {{"type", "reasoning"},
                {"id", item_id_},
                {"summary", ResponseJson::array()},
                {"content", done ? ResponseJson::array({part_json(text_)}) : ResponseJson::array()},
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
            {"content", done ? ResponseJson::array({part_json(text_)}) : ResponseJson::array()}};
  }

  ResponseJson response_json(const char* status) const {
    ResponseJson r = {
        {"id", id_},
        {"object", "response"},
        {"created_at", created_},
        {"status", status},
        {"error", nullptr},
        {"incomplete_details", std::string_view(status) == "incomplete" ? ResponseJson{{"reason", "max_output_tokens"}}
                                                                        : ResponseJson(nullptr)},
        {"model", model_},
        {"output", std::string_view(status) == "in_progress" ? ResponseJson::array() : output_},
        {"parallel_tool_calls", true},
        {"tool_choice", "auto"},
        {"tools", ResponseJson::array()},
        {"max_output_tokens", max_tokens_ ? ResponseJson(*max_tokens_) : ResponseJson(nullptr)},
        {"store", false}};
    if (std::string_view(status) != "in_progress")
      r["usage"] = {{"input_tokens", usage_.prompt_tokens},
                    {"input_tokens_details", {{"cached_tokens", usage_.cached_tokens}}},
                    {"output_tokens", usage_.completion_tokens},
                    {"output_tokens_details", {{"reasoning_tokens", 0}}},
                    {"total_tokens", usage_.prompt_tokens + usage_.completion_tokens}};
    return r;
  }

  std::string model_;
  std::string id_;
  std::int64_t created_;
  std::optional<int> max_tokens_;
  ChoiceReader reader_;
  Item open_ = Item::kNone;
  std::string item_id_, call_id_, name_, text_;  // the open item
  ResponseJson output_ = ResponseJson::array();  // the items done
  Usage usage_;
  std::string finish_;
  bool incomplete_ = false;
  std::int64_t sequence_ = 0;
};

}  // namespace

TranslatedRequest responses_to_chat(const Json& body, const ResponseJson& ordered) {
  TranslatedRequest t;
  Json& chat = t.body;
  chat = body;  // shared fields (model, temperature, top_p, stream, parallel_tool_calls, ...) as they are
  for (const char* key :
       {"input", "instructions", "max_output_tokens", "text", "tools", "tool_choice", "previous_response_id", "store",
        "reasoning", "metadata", "include", "truncation", "user", "background", "messages", "max_tokens", "n"})
    chat.erase(key);
  if (field_of(body, "previous_response_id"))
    bad_request("previous_response_id",
                "responses are not stored on this server: send the whole conversation in `input`");
  if (const Json* background = field_of(body, "background"); background != nullptr && *background == true)
    bad_request("background", "background responses are not supported");
  if (const Json* m = field_of(body, "max_output_tokens")) chat["max_tokens"] = *m;
  Json messages = Json::array();
  if (const Json* instructions = field_of(body, "instructions")) {
    if (!instructions->is_string()) bad_request("instructions", "instructions must be a string");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const Json* input = field_of(body, "input");
  if (input == nullptr) bad_request("input", "input is required: a string or an array of items");
  translate_input(*input, messages);
  chat["messages"] = std::move(messages);
  if (const ResponseJson* tools = ordered_at(ordered, {"tools"})) {
    ResponseJson converted = translate_tools(*tools);
    chat["tools"] = Json::parse(dump_json(converted));
    t.ordered["tools"] = std::move(converted);
  }
  if (const Json* choice = field_of(body, "tool_choice")) {
    if (choice->is_object() && field_of(*choice, "name") != nullptr) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*choice)["name"]}}}};
    } else {
      chat["tool_choice"] = *choice;
    }
  }
  if (const Json* text = field_of(body, "text")) {
    const Json* format = text->is_object() ? field_of(*text, "format") : nullptr;
    const Json* type = format != nullptr && format->is_object() ? field_of(*format, "type") : nullptr;
    if (type != nullptr && *type == "json_object") {
      chat["response_format"] = {{"type", "json_object"}};
    } else if (type != nullptr && *type == "json_schema") {
      const Json* schema = field_of(*format, "schema");
      if (schema == nullptr) bad_request("text", "text.format.schema is required for json_schema");
      chat["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"name", format->value("name", "output")}, {"schema", *schema}}}};
      if (const ResponseJson* written = ordered_at(ordered, {"text", "format", "schema"}))
        t.ordered["response_format"] = {{"json_schema", {{"schema", *written}}}};
    } else if (type != nullptr && *type != "text") {
      bad_request("text", "text.format.type must be text, json_object or json_schema");
    }
  }
  return t;
}

std::unique_ptr<AnswerShape> make_responses_shape(const GenerationJob& job, const Tokenizer&,
                                                  const std::string& model_name) {
  return std::make_unique<ResponsesShape>(job, model_name);
}

}  // namespace folio::server
