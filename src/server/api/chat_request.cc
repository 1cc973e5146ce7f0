#include "server/api/chat_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "server/api/api_error.h"
#include "server/http/http_message.h"

namespace folio::server {
namespace {

std::string message_content(const Json& message, const std::string& where) {
  const Json* content = field_of(message, "content");
  if (content == nullptr) return "";
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array())
    bad_request("messages", fmt::format("{}.content must be a string or an array of text parts", where));
  std::string joined;
  for (std::size_t j = 0; j < content->size(); ++j) {
    const Json& part = (*content)[j];
    if (!part.is_object()) bad_request("messages", fmt::format("{}.content[{}] must be an object", where, j));
    const Json* type = field_of(part, "type");
    if (type == nullptr || !type->is_string() || type->get_ref<const std::string&>() != "text")
      bad_request("messages", fmt::format("{}.content[{}]: only parts of type \"text\" are supported, got {}", where, j,
                                          type == nullptr ? std::string("none") : describe(*type)));
    const Json* text = field_of(part, "text");
    if (text == nullptr || !text->is_string())
      bad_request("messages", fmt::format("{}.content[{}].text must be a string", where, j));
    if (!joined.empty()) joined += '\n';
    joined += text->get<std::string>();
  }
  return joined;
}

// An assistant message's tool_calls for the template: each call's arguments
// as an object (HF templates print them with tojson), its id and name checked.
Json read_tool_calls(const Json& calls, const std::string& where) {
  if (!calls.is_array()) bad_request("messages", fmt::format("{}.tool_calls must be an array", where));
  Json out = Json::array();
  for (std::size_t j = 0; j < calls.size(); ++j) {
    const Json& c = calls[j];
    const std::string at = fmt::format("{}.tool_calls[{}]", where, j);
    if (!c.is_object()) bad_request("messages", fmt::format("{} must be an object", at));
    const Json* fn = field_of(c, "function");
    if (fn == nullptr || !fn->is_object()) bad_request("messages", fmt::format("{}.function must be an object", at));
    const Json* name = field_of(*fn, "name");
    if (name == nullptr || !name->is_string())
      bad_request("messages", fmt::format("{}.function.name must be a string", at));
    Json arguments = Json::object();
    if (const Json* args = field_of(*fn, "arguments")) {
      if (args->is_string()) {
        std::optional<Json> parsed = parse_json(args->get_ref<const std::string&>());
        if (!parsed)
          bad_request("messages", fmt::format("{}.function.arguments is not valid JSON (each key once)", at));
        arguments = std::move(*parsed);
      } else if (args->is_object()) {
        arguments = *args;
      } else {
        bad_request("messages", fmt::format("{}.function.arguments must be a JSON string", at));
      }
    }
    Json call = Json::object();
    if (const Json* id = field_of(c, "id")) {
      if (!id->is_string()) bad_request("messages", fmt::format("{}.id must be a string", at));
      call["id"] = *id;
    }
    call["type"] = "function";
    call["function"] = Json{{"name", *name}, {"arguments", std::move(arguments)}};
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

ChatMessage read_chat_message(const Json& m, std::size_t i) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad_request("messages", fmt::format("{} must be an object with role and content", where));
  const Json* role = field_of(m, "role");
  if (role == nullptr || !role->is_string()) bad_request("messages", fmt::format("{}.role must be a string", where));
  ChatMessage message;
  message.role = role->get<std::string>();
  if (message.role == "developer") message.role = "system";  // OpenAI's newer name for the system role
  if (message.role != "system" && message.role != "user" && message.role != "assistant" && message.role != "tool")
    bad_request("messages", fmt::format("{}.role \"{}\" is not supported; use system, user, assistant or tool", where,
                                        printable(message.role, 64)));
  message.content = message_content(m, where);
  if (message.role == "assistant") {
    if (const Json* reasoning = field_of(m, "reasoning_content"); reasoning != nullptr && !reasoning->is_null()) {
      if (!reasoning->is_string())
        bad_request("messages", fmt::format("{}.reasoning_content must be a string", where));
      message.reasoning = reasoning->get<std::string>();
    }
    if (const Json* calls = field_of(m, "tool_calls"); calls != nullptr && !calls->empty()) {
      message.fields["tool_calls"] = read_tool_calls(*calls, where);
      message.content_null = field_of(m, "content") == nullptr;
    }
  } else if (message.role == "tool") {
    for (const char* key : {"tool_call_id", "name"}) {
      const Json* v = field_of(m, key);
      if (v == nullptr) continue;
      if (!v->is_string()) bad_request("messages", fmt::format("{}.{} must be a string", where, key));
      message.fields[key] = *v;
    }
  }
  return message;
}

std::optional<Json> read_template_kwargs(const Json& body) {
  const Json* kwargs = get_object(body, "chat_template_kwargs");
  if (kwargs == nullptr) return std::nullopt;
  if (kwargs->size() > kMaxTemplateKwargs)
    bad_request("chat_template_kwargs", fmt::format("chat_template_kwargs has {} keys; at most {} are allowed",
                                                    kwargs->size(), kMaxTemplateKwargs));
  for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token"})
    if (kwargs->contains(reserved))
      bad_request("chat_template_kwargs",
                  fmt::format("chat_template_kwargs may not set `{}`: the server renders it from the request's own, "
                              "validated fields",
                              reserved));
  return *kwargs;
}

void check_reasoning_effort(const std::optional<std::string>& effort, const char* param) {
  if (!effort) return;
  if (std::find(kReasoningEfforts.begin(), kReasoningEfforts.end(), *effort) == kReasoningEfforts.end())
    bad_request(param, fmt::format("{} must be one of \"none\", \"minimal\", \"low\", \"medium\" or \"high\", not {}",
                                   param, describe(Json(*effort))));
}

void read_conversation(const Json& body, ChatRequest& r) {
  const Json* list = field_of(body, "messages");
  if (list == nullptr) bad_request("messages", "messages is required: an array of {role, content}");
  if (!list->is_array() || list->empty())
    bad_request("messages", "messages must be a non-empty array of {role, content} objects");
  r.messages.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) r.messages.push_back(read_chat_message((*list)[i], i));
  r.tools = read_tools(body);
  r.add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  r.continue_final_message = get_bool(body, "continue_final_message").value_or(false);
  if (r.continue_final_message && r.add_generation_prompt)
    bad_request("continue_final_message",
                "continue_final_message continues the last message, and add_generation_prompt starts a new one; "
                "set add_generation_prompt to false");
  if (r.continue_final_message && r.messages.back().role != "assistant")
    bad_request("continue_final_message", "continue_final_message needs the final message to be the assistant's");
  r.template_kwargs = read_template_kwargs(body);
  check_reasoning_effort(r.fields.reasoning_effort, "reasoning_effort");
}

ChatRequest read_chat_completion(const Json& body) {
  ChatRequest r;
  r.fields = read_request_fields(body);
  // max_completion_tokens is OpenAI's current name; max_tokens the older one.
  r.max_tokens = read_max_tokens(body, "max_tokens");
  if (auto m = read_max_tokens(body, "max_completion_tokens")) {
    r.max_tokens = m;
    r.fields.param_names["max_tokens"] = "max_completion_tokens";
  }
  r.stop = read_stop(body, "stop");
  r.logprobs = get_bool(body, "logprobs").value_or(false);
  std::optional<int>& top = r.fields.sampling.logprobs;
  if (auto n = get_int(body, "top_logprobs", std::numeric_limits<int>::min(), std::numeric_limits<int>::max())) {
    if (!r.logprobs && *n > 0) bad_request("top_logprobs", "top_logprobs needs logprobs set to true");
    top = static_cast<int>(*n);
    r.fields.param_names["logprobs"] = "top_logprobs";
  }
  if (r.logprobs && !top) top = 0;
  if (!r.logprobs) top.reset();
  read_conversation(body, r);
  return r;
}

}  // namespace folio::server
