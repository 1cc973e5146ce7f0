// make_chat_job and tokenize_chat: a ChatRequest against the served model.
#include <fmt/format.h>

#include <algorithm>

#include "server/api/api_error.h"
#include "server/api/chat_request.h"
#include "server/api/harmony_constraint.h"
#include "server/api/reasoning.h"
#include "server/api/tool_conversation.h"

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
  if (r.tools && model.tool_format != ToolFormat::kGeneric) refuse_special_text(r.tools->definitions, "tools", model);
  std::vector<ChatMessage> messages = r.messages;
  // A turn of tool calls alone reaches the template with content "" (as
  // llama-server and vLLM give it), unless the template tests for null.
  if (!model.null_tool_call_content)
    for (ChatMessage& m : messages) m.content_null = false;
  shape_tool_conversation(model.tool_format, model.chat_template->source(), r.tools, messages, options);
  try {
    return encode_chat(*model.chat_template, *model.tokenizer, messages, options, add_special_tokens,
                       model.allow_special_in_messages, r.continue_final_message);
  } catch (const ChatTemplateError& e) {
    if (e.kind() == ChatTemplateError::Kind::kRejected)
      bad_request("messages", fmt::format("the model's chat template rejects this conversation: {}", e.detail()));
    bad_request("messages", fmt::format("the model's chat template could not render this conversation: {}", e.what()));
  }
}

// A forced call in the harmony format; auto and none stay free (the
// parser reads the calls).
std::optional<ConstraintSpec> harmony_constraint(const ToolRequest& tools, const ModelContext& model) {
  if (tools.choice == ToolRequest::Choice::kAuto || tools.choice == ToolRequest::Choice::kNone) return std::nullopt;
  const Vocab& vocab = model.tokenizer->vocab();
  const std::optional<HarmonyTokens> ids = find_harmony_tokens(vocab);
  if (!ids)
    bad_request("tool_choice",
                "this model's template writes the harmony format, but its vocabulary lacks harmony's control tokens "
                "(<|start|>, <|channel|>, <|message|>, <|constrain|>, <|end|>), so a call cannot be forced: use "
                "tool_choice \"auto\"");
  std::vector<TokenId> control;
  for (TokenId id = 0; id < vocab.size(); ++id)
    if (vocab.is_control(id)) control.push_back(id);
  return harmony_call_constraint(tools, *ids, control);
}

}  // namespace

std::vector<TokenId> tokenize_chat(const ChatRequest& request, const ModelContext& model, bool add_special_tokens) {
  return encode_conversation(request, model, add_special_tokens);
}

GenerationJob make_chat_job(ChatRequest r, const ModelContext& model) {
  check_num_choices(1, r.fields.sampling.n, model);
  auto name_of = [&r](const std::string& param) {
    auto it = r.fields.param_names.find(param);
    return it == r.fields.param_names.end() ? param : it->second;
  };
  const std::optional<int> budget = r.fields.max_reasoning_tokens;
  const std::string budget_param = name_of("max_reasoning_tokens");
  if (r.fields.reasoning_effort) {
    // The one place it reaches the template: a variable of the templates
    // that take it (gpt-oss's); a request's own chat_template_kwargs win.
    if (model.chat_template->source().find("reasoning_effort") == std::string::npos)
      bad_request(name_of("reasoning_effort"),
                  "this model's chat template takes no reasoning effort; bound its thinking with "
                  "max_reasoning_tokens instead");
    if (!r.template_kwargs) r.template_kwargs = Json::object();
    if (!r.template_kwargs->contains("reasoning_effort"))
      (*r.template_kwargs)["reasoning_effort"] = *r.fields.reasoning_effort;
  }
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
  }
  // The tags that open calls are control tokens in most families' vocabularies
  // ([TOOL_CALLS], <|tool_call|>, <|python_tag|>), as are Mistral's [THINK]
  // tags; the output is read with them (the generic format's tags are folio's
  // own text).
  if ((job.parses_tool_calls() && model.tool_format != ToolFormat::kGeneric) ||
      (model.reasoning && template_thinks_in_control_tokens(model.chat_template->source())))
    job.params.skip_special_tokens = false;
  job.prompts.push_back(encode_conversation(r, model, /*add_special_tokens=*/false));
  job.reasoning = model.reasoning && !job.harmony;
  if (job.reasoning) {
    // The prompt's last tokens say whether the template opened <think> for the model.
    const std::vector<TokenId>& p = job.prompts[0];
    const std::vector<TokenId> tail(p.end() - std::min<std::ptrdiff_t>(16, static_cast<std::ptrdiff_t>(p.size())),
                                    p.end());
    job.reasoning_starts_inside = prompt_opens_thinking(model.tokenizer->decode(tail, /*render_special=*/true));
  }
  if (job.tools) {
    // A forced call comes after the thinking, which stays free.
    const Thinking thinking = !job.reasoning ? Thinking::kNone
                              : job.reasoning_starts_inside ? Thinking::kOpen
                                                            : Thinking::kMayOpen;
    if (auto spec = job.harmony ? harmony_constraint(*job.tools, model) : tool_constraint(*job.tools, model.tool_format, thinking)) {
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
  if (budget) {
    if (!job.reasoning)
      bad_request(budget_param,
                  "this model does not think in <think> tags as far as this server knows (its chat template shows "
                  "none); start the server with --reasoning-parser think if it does");
    ReasoningBudget& b = job.params.reasoning_budget;
    b.max_tokens = *budget;
    b.open = model.tokenizer->encode("<think>", /*add_special=*/false, /*parse_special=*/true);
    b.close = model.tokenizer->encode("</think>", /*add_special=*/false, /*parse_special=*/true);
    b.starts_inside = job.reasoning_starts_inside;
  }
  finish_job(job, model, "messages");
  return job;
}

}  // namespace folio::server
