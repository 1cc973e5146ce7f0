// GenerationJob: an OpenAI completions or chat-completions request read,
// validated and tokenized: what the engine is to run (one EngineRequest per
// prompt) and how the answer is to be shaped. A job that comes out of the
// parsers is valid for the served model; every refusal is an ApiError.
#pragma once

#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "server/json_fields.h"
#include "server/tool_calls.h"
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
  nlohmann::ordered_json default_template_kwargs = nlohmann::ordered_json::object();  // --chat-template-kwargs
  bool priority_scheduling = false;  // the engine schedules by `priority` (--scheduling-policy priority)
  bool reasoning = false;            // chat answers split <think> text into reasoning_content
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

  // Whether each choice's output is read for tool calls.
  bool parses_tool_calls() const { return tools && tools->parses_output(); }

  int num_choices() const { return static_cast<int>(prompts.size()) * params.n; }
};

// A request of another API surface (Anthropic's messages, OpenAI's
// responses) as the chat body it means, and its ordered fields.
struct TranslatedRequest {
  Json body;
  ResponseJson ordered = ResponseJson::object();
};

// POST /v1/completions and POST /v1/chat/completions bodies; `ordered` is
// the body's ordered_fields (tools and schemas in the order written).
GenerationJob parse_completion_request(const Json& body, const ResponseJson& ordered, const ModelContext& model);
GenerationJob parse_chat_request(const Json& body, const ResponseJson& ordered, const ModelContext& model);

// The `model` field: absent, or the served model's name (404 otherwise, as vLLM answers).
void check_model_field(const Json& body, const ModelContext& model);

// The conversation in `messages` rendered with the chat template and
// tokenized; shared with POST /tokenize so that both count alike.
std::vector<TokenId> tokenize_chat(const Json& body, const ResponseJson& ordered, const ModelContext& model,
                                   bool add_generation_prompt, bool add_special_tokens);
// A completions prompt string, tokenized as POST /v1/completions does.
std::vector<TokenId> tokenize_text(const std::string& text, const ModelContext& model, bool add_special_tokens);

}  // namespace folio::server
