// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens):
// the request read into a ChatRequest (system, text, tool_use and tool_result
// blocks, tools, tool_choice, stop_sequences, thinking), and the answer
// written as Anthropic writes it: content blocks (thinking, text, tool_use),
// stop_reason, usage, and for streams the message_start / content_block_* /
// message_delta / message_stop events.
#pragma once

#include <memory>
#include <string>

#include "server/api/api_error.h"
#include "server/api/chat_request.h"
#include "server/api/generation_call.h"

namespace folio::server {

// The request, checked for JSON types. `count_only`: count_tokens, where
// max_tokens is not asked for.
ChatRequest read_messages_request(const Json& body, bool count_only = false);

// The answer's shape for /v1/messages.
std::unique_ptr<AnswerShape> make_messages_shape(const GenerationJob& job, const Tokenizer& tokenizer,
                                                 const GenerationContext& context);

// {"type": "error", "error": {"type": ..., "message": ...}}, as Anthropic's clients read errors.
std::string anthropic_error_body(int status, const std::string& message);

}  // namespace folio::server
