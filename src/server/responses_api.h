// OpenAI's Responses API (POST /v1/responses) as a thin translation onto
// chat completions: `input` (a string, or message, function_call and
// function_call_output items), `instructions`, function `tools`,
// `tool_choice`, `text.format` (json_schema / json_object) become a chat
// body read by parse_chat_request; the answer is written as a response
// object (reasoning, message and function_call output items) or as its
// stream of response.* events. Nothing is stored: previous_response_id is
// refused, and a client sends the whole conversation each time.
#pragma once

#include <memory>
#include <string>

#include "server/generation_call.h"
#include "server/openai_request.h"

namespace folio::server {

TranslatedRequest responses_to_chat(const Json& body, const ResponseJson& ordered);

std::unique_ptr<AnswerShape> make_responses_shape(const GenerationJob& job, const Tokenizer& tokenizer,
                                                  const std::string& model_name);

}  // namespace folio::server
