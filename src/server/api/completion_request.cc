#include "server/api/completion_request.h"

#include <fmt/format.h>

#include <limits>

#include "server/api/api_error.h"
#include "server/api/request_fields.h"
#include "server/api/utf8_text.h"

namespace folio::server {
namespace {

constexpr int kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kIntMin = std::numeric_limits<int>::min();

constexpr const char* kPromptShapes =
    "prompt must be a string, a list of strings, a list of token ids or a list of such lists";

}  // namespace

std::vector<TokenId> tokenize_text(const std::string& text, const ModelContext& model, bool add_special_tokens) {
  if (text.empty()) bad_request("prompt", "the prompt is an empty string; give some text");
  return model.tokenizer->encode(text, add_special_tokens, /*parse_special=*/true);
}

GenerationJob read_completion_request(const Json& body, const ModelContext& model) {
  RequestFields fields = read_request_fields(body);
  if (fields.max_reasoning_tokens || fields.reasoning_effort)
    bad_request(fields.max_reasoning_tokens ? "max_reasoning_tokens" : "reasoning_effort",
                "a reasoning budget or effort applies to chat requests only (/v1/chat/completions, /v1/messages, "
                "/v1/responses); a completion's prompt is the client's to write");
  const bool echo = get_bool(body, "echo").value_or(false);
  if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty())
    bad_request("suffix", "suffix (fill-in-the-middle) is not supported; leave it out");
  if (auto best_of = get_int(body, "best_of", 1, kIntMax); best_of && *best_of != fields.sampling.n)
    bad_request("best_of", "best_of is not supported; leave it out or set it equal to n");
  std::optional<int> top;
  if (auto lp = get_int(body, "logprobs", kIntMin, kIntMax)) top = static_cast<int>(*lp);
  const std::optional<int> max_tokens = read_max_tokens(body, "max_tokens");
  std::vector<std::string> stop = read_stop(body, "stop");

  const Json* prompt = field_of(body, "prompt");
  if (prompt == nullptr) bad_request("prompt", "prompt is required: a string, a list of strings or token ids");
  const bool many = prompt->is_array() && !prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array());
  check_num_choices(many ? prompt->size() : 1, fields.sampling.n, model);

  GenerationJob job = begin_job(Endpoint::kCompletions, std::move(fields), model);
  job.echo = echo;
  if (top) {
    job.logprobs = true;
    job.params.logprobs = top;
  }
  // Echo with logprobs scores the prompt too (its first token has none).
  if (job.echo && job.logprobs && !job.params.prompt_logprobs) job.params.prompt_logprobs = job.params.logprobs;
  job.params.max_tokens = max_tokens.value_or(kDefaultCompletionMaxTokens);
  job.params.stop = std::move(stop);

  if (prompt->is_string()) {
    job.prompts.push_back(tokenize_text(prompt->get<std::string>(), model, true));
    job.echo_texts.push_back(prompt->get<std::string>());
  } else if (prompt->is_array()) {
    if (prompt->empty()) bad_request("prompt", "prompt is an empty list; give at least one prompt");
    const Json& first = (*prompt)[0];
    if (first.is_string()) {
      for (const Json& p : *prompt) {
        if (!p.is_string()) bad_request("prompt", "a list prompt must hold only strings, or only token ids");
        job.prompts.push_back(tokenize_text(p.get<std::string>(), model, true));
        job.echo_texts.push_back(p.get<std::string>());
      }
    } else if (first.is_number_integer()) {
      job.prompts.push_back(read_token_ids(*prompt, "prompt"));
    } else if (first.is_array()) {
      for (const Json& p : *prompt) {
        if (!p.is_array()) bad_request("prompt", "a list of token-id prompts must hold only lists of integers");
        job.prompts.push_back(read_token_ids(p, "prompt"));
      }
    } else {
      bad_request("prompt", kPromptShapes);
    }
  } else {
    bad_request("prompt", kPromptShapes);
  }
  finish_job(job, model, "prompt");
  if (job.echo && job.echo_texts.empty())
    for (const auto& ids : job.prompts)
      job.echo_texts.push_back(client_text(model.tokenizer->decode(ids, /*render_special=*/true)));
  if (!job.echo) job.echo_texts.clear();
  return job;
}

}  // namespace folio::server
