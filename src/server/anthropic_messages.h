// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) as
// a thin translation onto chat completions: the request becomes an OpenAI
// chat body (system, text, tool_use and tool_result blocks, tools,
// tool_choice, stop_sequences, thinking) read by parse_chat_request, and the
// answer is written as Anthropic writes it: content blocks (thinking, text,
// tool_use), stop_reason, usage, and for streams the message_start /
// content_block_* / message_delta / message_stop events.
#pragma once

#include <memory>
#include <string>

#include "server/api_error.h"
#include "server/generation_call.h"
#include "server/openai_request.h"

namespace folio::server {

// The request as a chat body, checked.
TranslatedRequest messages_to_chat(const Json& body, const ResponseJson& ordered);

// The answer's shape for /v1/messages.
std::unique_ptr<AnswerShape> make_messages_shape(const GenerationJob& job, const Tokenizer& tokenizer,
                                                 const std::string& model_name);

// {"type": "error", "error": {"type": ..., "message": ...}}, as Anthropic's clients read errors.
std::string anthropic_error_body(int status, const std::string& message);

}  // namespace folio::server
