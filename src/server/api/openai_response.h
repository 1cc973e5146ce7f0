// ResponseBuilder: the engine's outputs for one job in OpenAI's shapes: the
// whole response (non-streaming), or stream chunks, one per choice delta,
// with the role first (chat), finish_reason on each choice's last chunk and a
// usage chunk with empty choices at the end. Choices are indexed prompt-major:
// prompt p's completion i is choice p x n + i, as OpenAI indexes them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/request_output.h"
#include "server/api/choice_reader.h"
#include "server/api/generation_job.h"
#include "server/api/json_fields.h"

namespace folio::server {

class ResponseBuilder {
 public:
  // `system_fingerprint`: OutputFingerprint's id, on the response and every chunk.
  ResponseBuilder(const GenerationJob& job, const Tokenizer& tokenizer, std::string model_name, std::string id,
                  std::int64_t created, std::string system_fingerprint = {});

  // Streaming: the chunks that open each choice (chat: the assistant role;
  // completions with echo: the prompt text). Empty for completions otherwise.
  std::vector<Json> opening_chunks();
  // Streaming: the chunk for one delta of prompt `prompt`; null when the delta
  // carries nothing to send (no text, logprobs or finish reason).
  Json chunk(int prompt, const CompletionDelta& delta);
  // Streaming: the final usage chunk (stream_options.include_usage).
  Json usage_chunk(const Usage& usage) const;

  // Non-streaming: folds in a delta; response() is the whole answer.
  void add(int prompt, const CompletionDelta& delta);
  // Non-streaming: the prompt logprobs of prompt `prompt`, before its deltas:
  // vLLM's prompt_logprobs (per choice for completions, for the response in
  // chat), and with echo the prompt's tokens lead the choice's logprobs.
  void add_prompt_logprobs(int prompt, std::span<const PromptTokenLogprob> logprobs);
  Json response(const Usage& usage) const;

  // Per finished choice: the finish reason ("stop", "length", "tool_calls", "abort").
  const std::vector<std::string>& finish_reasons() const { return finish_; }

  static Json usage_json(const Usage& usage);
  // vLLM's stop_reason: the stop string or stop token id that ended the
  // choice; null when it ended by its end token or its length.
  static Json stop_reason_json(const CompletionDelta& delta);

 private:
  int choice_of(int prompt, const CompletionDelta& d) const { return prompt * n_ + d.index; }
  Json envelope(const char* object) const;
  // The delta's logprobs in the endpoint's shape, advancing text offsets.
  Json logprobs_json(int choice, const CompletionDelta& delta);
  // A token's text for logprobs ("bytes:\\xe6\\x97" when it is part of a
  // character), and its raw bytes ("" for ids outside the tokenizer).
  std::string token_text(TokenId id) const;
  std::string piece(TokenId id, bool render_special) const;
  // The choice's text through its ChoiceReader (chat), and its finish reason.
  std::vector<OutputEvent> read_choice(int choice, const CompletionDelta& delta);
  std::string finish_name(int choice, FinishReason reason) const;

  const GenerationJob& job_;
  const Tokenizer& tokenizer_;
  std::string model_;
  std::string id_;
  std::int64_t created_;
  std::string system_fingerprint_;
  int n_;
  bool chat_;
  std::vector<std::string> text_;       // [num_choices] non-streaming text
  std::vector<Json> logprobs_;  // [num_choices] non-streaming logprobs (null when not asked)
  std::vector<std::string> finish_;     // [num_choices]
  std::vector<Json> stop_;      // [num_choices] stop_reason: the stop string, the stop token's id, or null
  std::vector<std::int64_t> offset_;    // [num_choices] completions: text_offset of the next token
  std::vector<ChoiceReader> readers_;   // [num_choices] chat
  std::vector<std::string> reasoning_;  // [num_choices] chat, non-streaming: reasoning text
  std::vector<Json> calls_;     // [num_choices] chat, non-streaming: the tool_calls so far
  std::vector<TokenId> first_tokens_;   // [prompts] each prompt's first token (echo with logprobs)
  std::vector<Json> prompt_logprobs_;  // [prompts] vLLM's prompt_logprobs (null when not asked)
};

// An id unique within a server run: `prefix` and 24 hex digits. The prefix
// is the API's own spelling, separator included ("chatcmpl-", "cmpl-",
// "resp_", "msg_", ...): clients and test suites match it.
std::string new_response_id(const char* prefix);

}  // namespace folio::server
