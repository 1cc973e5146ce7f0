// RequestFields: what the generation APIs say with the same names (OpenAI's,
// and vLLM's and llama-server's extensions): sampling, streaming, the output
// format and scheduling hints. Read for JSON types and the server's own
// limits only; value ranges are SamplingParams::validate's and the prompt's
// are check_request's, both asked by finish_job with the served model at hand,
// so each error has one owner and one wording.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "server/api/generation_job.h"
#include "server/api/json_fields.h"
#include "server/api/structured_output.h"

namespace folio::server {

struct RequestFields {
  std::optional<std::string> model;  // the `model` field, when given
  SamplingParams sampling;           // without max_tokens and stop (each API names them) and the constraint
  std::optional<RequestedConstraint> output_format;  // compiled by finish_job
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool speculative = true;
  int priority = 0;
  std::string cache_salt;
  bool tokens_as_ids = false;  // return_tokens_as_token_ids
  // Chat: thinking tokens before </think> is forced (max_reasoning_tokens,
  // Anthropic's thinking.budget_tokens); the reasoning effort a template
  // takes (reasoning_effort, Responses' reasoning.effort).
  std::optional<int> max_reasoning_tokens;
  std::optional<std::string> reasoning_effort;
  // The request's own names of parameters SamplingParams names otherwise
  // (max_tokens -> max_completion_tokens, logprobs -> top_logprobs, ...), so
  // that an error names the field the client sent.
  std::map<std::string, std::string> param_names;
};

// The shared fields of `body`.
RequestFields read_request_fields(const Json& body);

// Stop strings: a string or an array of strings (at most kMaxStopStrings).
std::vector<std::string> read_stop(const Json& body, const char* name);
inline constexpr std::size_t kMaxStopStrings = 64;
// A token-count field (max_tokens and its other names): an integer that fits
// an int; its range is SamplingParams::validate's.
std::optional<int> read_max_tokens(const Json& body, const char* name);
// Token ids (a prompt, stop_token_ids): integers that fit a TokenId; whether
// the vocabulary has them is check_request's.
std::vector<TokenId> read_token_ids(const Json& list, const char* param);

// The `model` field: absent, or the served model's name (404 otherwise, as vLLM answers).
void check_model_name(const std::optional<std::string>& name, const ModelContext& model);
// prompts x n against the server's limits, before any prompt is tokenized,
// so that one request cannot take the whole queue (nor the CPU to tokenize
// what it would refuse).
void check_num_choices(std::size_t num_prompts, int n, const ModelContext& model);

// A job begun from `fields`: the model's name checked, the output format
// compiled, the priority honoured.
GenerationJob begin_job(Endpoint endpoint, RequestFields fields, const ModelContext& model);
// The job made (prompts, max_tokens, stop, logprobs set), checked whole:
// every value in range and every prompt runnable (check_request), naming
// `prompt_param` for the prompt.
void finish_job(GenerationJob& job, const ModelContext& model, const char* prompt_param);

}  // namespace folio::server
