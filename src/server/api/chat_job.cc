// make_chat_job and tokenize_chat: a ChatRequest against the served model.
#include <fmt/format.h>

#include <algorithm>

#include "server/api/api_error.h"
#include "server/api/chat_request.h"
#include "server/api/reasoning.h"

namespace folio::server {
namespace {

// Every string inside `root`, keys too, however deep: a template may print
// any of them outside the message markers, so none may hold special-token text.
void refuse_special_text(const Json& root, const char* param, const ModelContext& model) {
  if (model.allow_special_in_messages) return;
  std::vector<const Json*> todo = {&root};
  while (!todo.empty()) {
    const Json* v = todo.back();
    todo.pop_back();
    if (v->is_string() && has_special_token_text(*model.tokenizer, v->get_ref<const std::string&>()))
      bad_request(param, fmt::format("{} holds the text of a special token; remove it, or start the server with "
                                     "--allow-special-in-messages",
                                     param));
    if (v->is_object())
      for (const auto& [key, child] : v->items())
        if (has_special_token_text(*model.tokenizer, key))
          bad_request(param, fmt::format("{} holds the text of a special token in a key", param));
    if (v->is_structured())
      for (const Json& child : *v) todo.push_back(&child);
  }
}

// For a template that knows no tools: the tools described in the system
// message, calls written into the assistant's text as the model is asked to
// write them, and results handed back as user text.
void describe_tools_in_messages(std::vector<ChatMessage>& messages, const std::optional<ToolRequest>& tools) {
  for (ChatMessage& m : messages) {
    if (m.role == "tool") {
      m.role = "user";
      m.content = "<tool_response>\n" + m.content + "\n</tool_response>";
      m.fields = Json::object();
    } else if (auto calls = m.fields.find("tool_calls"); calls != m.fields.end()) {
      std::string text = m.content_null ? std::string() : m.content;
      for (const Json& c : *calls) {
        if (!text.empty()) text += '\n';
        text += fmt::format("<tool_call>\n{{\"name\": {}, \"arguments\": {}}}\n</tool_call>",
                            dump_json(c["function"]["name"]), dump_json(c["function"]["arguments"]));
      }
      m.content = std::move(text);
      m.content_null = false;
      m.fields = Json::object();
    }
  }
  if (!tools) return;
  const std::string prompt = generic_tools_prompt(*tools);
  if (!messages.empty() && messages.front().role == "system") {
    messages.front().content += "\n\n" + prompt;
  } else {
    messages.insert(messages.begin(), ChatMessage{"system", prompt});
  }
}

// The conversation with its tools, rendered and tokenized.
std::vector<TokenId> encode_conversation(const ChatRequest& r, const ModelContext& model, bool add_special_tokens) {
  for (const ChatMessage& m : r.messages) refuse_special_text(m.fields, "messages", model);
  ChatRenderOptions options = chat_render_options(model.tokenizer->vocab());
  options.add_generation_prompt = r.add_generation_prompt;
  options.extra = model.default_template_kwargs;
  if (r.template_kwargs) {
    refuse_special_text(*r.template_kwargs, "chat_template_kwargs", model);
    for (const auto& [key, value] : r.template_kwargs->items()) options.extra[key] = value;
  }
  std::vector<ChatMessage> described;
  const std::vector<ChatMessage>* messages = &r.messages;
  if (model.tool_format == ToolFormat::kGeneric) {
    described = r.messages;
    describe_tools_in_messages(described, r.tools);
    messages = &described;
  } else if (r.tools) {
    refuse_special_text(r.tools->definitions, "tools", model);
    options.tools = r.tools->definitions;
  }
  try {
    return encode_chat(*model.chat_template, *model.tokenizer, *messages, options, add_special_tokens,
                       model.allow_special_in_messages, r.continue_final_message);
  } catch (const ChatTemplateError& e) {
    if (e.kind() == ChatTemplateError::Kind::kRejected)
      bad_request("messages", fmt::format("the model's chat template rejects this conversation: {}", e.detail()));
    bad_request("messages", fmt::format("the model's chat template could not render this conversation: {}", e.what()));
  }
}

}  // namespace

std::vector<TokenId> tokenize_chat(const ChatRequest& request, const ModelContext& model, bool add_special_tokens) {
  return encode_conversation(request, model, add_special_tokens);
}

GenerationJob make_chat_job(ChatRequest r, const ModelContext& model) {
  check_num_choices(1, r.fields.sampling.n, model);
  GenerationJob job = begin_job(Endpoint::kChatCompletions, std::move(r.fields), model);
  job.params.max_tokens = r.max_tokens;
  job.params.stop = std::move(r.stop);
  job.logprobs = r.logprobs;
  job.tools = r.tools;
  job.tool_format = model.tool_format;
  if (model.tool_format == ToolFormat::kHarmony) {
    // The channels and calls are told apart by control tokens, so they stay
    // in the text for HarmonyParser, which keeps them out of every answer.
    job.harmony = true;
    job.params.skip_special_tokens = false;
    // The harmony template reads every assistant content as a string; a
    // call's null content (what OpenAI clients send back) is the empty one.
    for (ChatMessage& m : r.messages) m.content_null = false;
    if (job.tools && job.tools->choice != ToolRequest::Choice::kAuto && job.tools->choice != ToolRequest::Choice::kNone)
      bad_request("tool_choice",
                  "this model writes tool calls in the harmony format, which folio does not constrain yet: use "
                  "tool_choice \"auto\" (or \"none\")");
  }
  if (job.tools) {
    if (auto spec = tool_constraint(*job.tools, model.tool_format)) {
      if (job.params.constraint) {
        // Forced calls and a response format cannot both hold; with auto the
        // response format wins and calls are still read from the output.
        if (job.tools->choice != ToolRequest::Choice::kAuto)
          bad_request("tool_choice",
                      "tool_choice forces a tool call, which a response_format cannot also constrain; "
                      "give one of them");
      } else {
        if (model.constraints == nullptr) bad_request("tools", "this server does not constrain outputs");
        try {
          job.params.constraint = model.constraints->compile(*spec);
        } catch (const ConstraintError& e) {
          bad_request("tools", e.what());
        }
      }
    }
  }
  job.prompts.push_back(encode_conversation(r, model, /*add_special_tokens=*/false));
  job.reasoning = model.reasoning && !job.harmony;
  if (job.reasoning) {
    // The prompt's last tokens say whether the template opened <think> for the model.
    const std::vector<TokenId>& p = job.prompts[0];
    const std::vector<TokenId> tail(p.end() - std::min<std::ptrdiff_t>(16, static_cast<std::ptrdiff_t>(p.size())),
                                    p.end());
    job.reasoning_starts_inside = prompt_opens_thinking(model.tokenizer->decode(tail, /*render_special=*/true));
  }
  finish_job(job, model, "messages");
  return job;
}

}  // namespace folio::server
