// ChatRequest: a conversation to answer, whichever API brought it (OpenAI's
// chat completions here; Anthropic's Messages and OpenAI's Responses read into
// the same type in their own files), parsed once from the body into typed
// fields and checked for JSON types and the server's limits. make_chat_job
// checks it against the served model and makes the engine's job: one path
// from every API to the engine.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "server/api/chat_prompt.h"
#include "server/api/generation_job.h"
#include "server/api/request_fields.h"
#include "server/api/tool_calls.h"

namespace folio::server {

struct ChatRequest {
  RequestFields fields;
  std::optional<int> max_tokens;   // unset: until the context is full
  std::vector<std::string> stop;   // stop strings
  bool logprobs = false;           // the chosen tokens' logprobs (fields.sampling.logprobs: how many alternatives)
  std::vector<ChatMessage> messages;  // at least one; roles system, user, assistant or tool
  std::optional<ToolRequest> tools;
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // the answer goes on from the final (assistant) message
  std::optional<Json> template_kwargs;  // chat_template_kwargs (an object); unset: the server's defaults
};

// POST /v1/chat/completions (and /tokenize's messages form).
ChatRequest read_chat_completion(const Json& body);

// The chat job: the conversation checked (no special-token text where the
// template prints it verbatim), rendered with the chat template and tools,
// tokenized, and its parameters checked against the served model.
GenerationJob make_chat_job(ChatRequest request, const ModelContext& model);

// The conversation's token ids as make_chat_job renders them (POST /tokenize,
// Anthropic's count_tokens).
std::vector<TokenId> tokenize_chat(const ChatRequest& request, const ModelContext& model, bool add_special_tokens);

// Read helpers the other chat APIs share.
// messages, tools, tool_choice, parallel_tool_calls, add_generation_prompt,
// continue_final_message and chat_template_kwargs, as OpenAI's chat names them.
void read_conversation(const Json& body, ChatRequest& request);
// An OpenAI chat message object (role, content, tool_calls, tool_call_id, name).
ChatMessage read_chat_message(const Json& message, std::size_t index);
// chat_template_kwargs: an object of at most kMaxTemplateKwargs keys.
std::optional<Json> read_template_kwargs(const Json& body);
inline constexpr std::size_t kMaxTemplateKwargs = 64;
// OpenAI's reasoning effort (chat's reasoning_effort, Responses'
// reasoning.effort; `param` names it in errors) is read into
// RequestFields::reasoning_effort and must be one of kReasoningEfforts.
// make_chat_job alone hands it to the template, as the variable
// `reasoning_effort` (gpt-oss's harmony template writes it into its system
// message, "Reasoning: high"), and refuses it (400) for a template that does
// not read it; a reasoning_effort in chat_template_kwargs wins.
inline constexpr std::array<std::string_view, 5> kReasoningEfforts = {"none", "minimal", "low", "medium", "high"};
void check_reasoning_effort(const std::optional<std::string>& effort, const char* param);

}  // namespace folio::server
