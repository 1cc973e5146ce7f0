// OpenAI's Responses API (POST /v1/responses): `input` (a string, or
// message, function_call and function_call_output items), `instructions`,
// function `tools`, `tool_choice` and `text.format` (json_schema /
// json_object) read into a ChatRequest; the answer is written as a response
// object (reasoning, message and function_call output items) or as its
// stream of response.* events. Nothing is stored: previous_response_id is
// refused, and a client sends the whole conversation each time.
#pragma once

#include <memory>
#include <string>

#include "server/api/chat_request.h"
#include "server/api/generation_call.h"

namespace folio::server {

ChatRequest read_responses_request(const Json& body);

std::unique_ptr<AnswerShape> make_responses_shape(const GenerationJob& job, const Tokenizer& tokenizer,
                                                  const std::string& model_name);

}  // namespace folio::server
