// GenerationJob: a request read, checked against the served model and
// tokenized, whichever API brought it: what the engine is to run (one
// EngineRequest per prompt) and how the answer is to be shaped. A job that
// make_chat_job or read_completion_request returns is valid for the served
// model; every refusal before it is an ApiError.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "server/api/json_fields.h"
#include "server/api/tool_calls.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace folio::server {

// What reading a request needs to know about the served model.
struct ModelContext {
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;
  std::int64_t vocab_size = 0;  // ids a prompt or logit_bias may name
  int max_model_len = 0;        // prompt tokens must be fewer
  std::string served_model_name;
  int max_n = 16;
  int max_choices = 64;                           // prompts x n in one request (at most a client's whole share)
  bool allow_special_in_messages = false;         // chat content may hold special tokens (the old reading)
  ConstraintCompiler* constraints = nullptr;      // structured outputs (null: refused)
  ToolFormat tool_format = ToolFormat::kGeneric;  // how the chat template writes tool calls
  Json default_template_kwargs = Json::object();  // --chat-template-kwargs
  bool priority_scheduling = false;  // the engine schedules by `priority` (--scheduling-policy priority)
  bool reasoning = false;            // chat answers split <think> text into reasoning_content
  bool null_tool_call_content = false;  // the template tests content for none: a tool-call-only turn keeps null
};

enum class Endpoint { kCompletions, kChatCompletions };

struct GenerationJob {
  Endpoint endpoint = Endpoint::kCompletions;
  std::vector<std::vector<TokenId>> prompts;  // [num_prompts][num_prompt_tokens]
  std::vector<std::string> echo_texts;        // [num_prompts] when echo: the prompt's text
  SamplingParams params;                      // shared by every prompt; n completions each
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  bool echo = false;                 // completions: the prompt text leads each choice
  bool logprobs = false;             // logprobs asked for (params.logprobs holds the top-n)
  bool speculative = true;           // may use the server's speculative decoding ("speculative": false turns it off)
  int priority = 0;                  // lower runs first under --scheduling-policy priority
  std::string cache_salt;            // requests share cached prefixes only with the same salt
  bool tokens_as_ids = false;        // return_tokens_as_token_ids: logprobs name tokens "token_id:N"
  std::optional<ToolRequest> tools;  // chat: the request's tools
  ToolFormat tool_format = ToolFormat::kGeneric;
  bool reasoning = false;                // split <think> text into reasoning_content
  bool reasoning_starts_inside = false;  // the prompt ends inside an open <think>
  // gpt-oss's harmony format: control tokens are rendered in the text and
  // HarmonyParser reads its channels into reasoning, content and calls.
  bool harmony = false;
  std::map<std::string, std::string> param_names;  // RequestFields::param_names

  // Whether each choice's output is read for tool calls.
  bool parses_tool_calls() const { return tools && tools->parses_output(); }

  int num_choices() const { return static_cast<int>(prompts.size()) * params.n; }
};

}  // namespace folio::server
