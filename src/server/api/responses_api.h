// OpenAI's Responses API (POST /v1/responses): `input` (a string, or
// message, function_call and function_call_output items), `instructions`,
// function `tools`, `tool_choice` and `text.format` (json_schema /
// json_object) read into a ChatRequest; the answer is written as a response
// object (reasoning, message and function_call output items) or as its
// stream of response.* events. With store (OpenAI's default: true) the
// finished response is kept in a ResponseStore: GET /v1/responses/{id}
// returns it, and a request's previous_response_id continues its
// conversation (its input, the earlier ones' and its answer; not its
// instructions, which do not carry over).
#pragma once

#include <memory>
#include <string>

#include "server/api/chat_request.h"
#include "server/api/generation_call.h"
#include "server/api/response_store.h"

namespace folio::server {

ChatRequest read_responses_request(const Json& body);

// What a Responses request asks of the store.
struct ResponseStorage {
  bool store = true;  // keep the finished response (OpenAI's default)
  std::optional<std::string> previous_response_id;
  bool has_instructions = false;  // the request's first message is its instructions
};
ResponseStorage read_response_storage(const Json& body);

// The stored response `storage.previous_response_id` names; an ApiError
// (400, previous_response_not_found) saying whether it was evicted or never
// stored here. `request`'s conversation then continues it: its instructions,
// the stored conversation, its input.
std::shared_ptr<const StoredResponse> continue_stored(ResponseStore& store, const ResponseStorage& storage,
                                                      ChatRequest& request);

// `conversation`: the request's, without instructions (continue_stored's
// result included), kept with the answer when storage.store and `store` is
// given (without a store the response says store: false).
std::unique_ptr<AnswerShape> make_responses_shape(const GenerationJob& job, const Tokenizer& tokenizer,
                                                  const GenerationContext& context, ResponseStore* store = nullptr,
                                                  ResponseStorage storage = {},
                                                  std::vector<ChatMessage> conversation = {});

}  // namespace folio::server
