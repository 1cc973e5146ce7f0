#include "server/api/request_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "engine/request.h"
#include "server/api/api_error.h"

namespace folio::server {
namespace {

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kIntMin = std::numeric_limits<int>::min();
constexpr std::int64_t kTokenIdMax = std::numeric_limits<TokenId>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kMaxCacheSaltBytes = 1024;

float as_float(const Json& body, const char* name, float fallback) {
  auto v = get_number(body, name);
  if (!v) return fallback;
  // Finite as a float too: 1e39 is a double but not a float.
  const auto f = static_cast<float>(*v);
  if (!std::isfinite(f)) bad_request(name, fmt::format("{} must be a finite number", name));
  return f;
}

TokenId token_id(const Json& v, const char* param) {
  if (!v.is_number_integer())
    bad_request(param, fmt::format("{} must hold token ids (integers); found {}", param, describe(v)));
  const std::optional<std::int64_t> id = as_int64(v);
  if (!id || *id < 0 || *id > kTokenIdMax)
    bad_request(param, fmt::format("{} holds {}, which is not a token id: ids are integers from 0", param, v.dump()));
  return static_cast<TokenId>(*id);
}

void read_logit_bias(const Json& body, SamplingParams& p) {
  const Json* bias = get_object(body, "logit_bias");
  if (bias == nullptr) return;
  for (const auto& [key, value] : bias->items()) {
    std::size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != key.size() || id < 0 || id > kTokenIdMax)
      bad_request("logit_bias", fmt::format("logit_bias keys must be token ids written as strings (\"50256\"); "
                                            "got \"{}\"",
                                            key));
    if (!value.is_number() || !std::isfinite(value.get<float>()))
      bad_request("logit_bias", fmt::format("logit_bias[\"{}\"] must be a finite number", key));
    p.logit_bias[static_cast<TokenId>(id)] = value.get<float>();
  }
}

}  // namespace

std::vector<std::string> read_stop(const Json& body, const char* name) {
  const Json* v = field_of(body, name);
  if (v == nullptr) return {};
  if (v->is_string()) return {v->get<std::string>()};
  const std::string must = fmt::format("{} must be a string or an array of strings", name);
  if (!v->is_array()) bad_request(name, must);
  if (v->size() > kMaxStopStrings)
    bad_request(name, fmt::format("{} has {} strings; at most {} are allowed", name, v->size(), kMaxStopStrings));
  std::vector<std::string> out;
  for (const Json& s : *v) {
    if (!s.is_string()) bad_request(name, must);
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::optional<int> read_max_tokens(const Json& body, const char* name) {
  auto m = get_int(body, name, kInt64Min, kIntMax);
  return m ? std::optional<int>(static_cast<int>(std::max<std::int64_t>(*m, kIntMin))) : std::nullopt;
}

std::vector<TokenId> read_token_ids(const Json& list, const char* param) {
  std::vector<TokenId> ids;
  ids.reserve(list.size());
  for (const Json& v : list) ids.push_back(token_id(v, param));
  return ids;
}

RequestFields read_request_fields(const Json& body) {
  RequestFields f;
  f.model = get_string(body, "model");
  SamplingParams& p = f.sampling;
  p.temperature = as_float(body, "temperature", p.temperature);
  p.top_p = as_float(body, "top_p", p.top_p);
  p.min_p = as_float(body, "min_p", p.min_p);
  p.repetition_penalty = as_float(body, "repetition_penalty", p.repetition_penalty);
  p.presence_penalty = as_float(body, "presence_penalty", p.presence_penalty);
  p.frequency_penalty = as_float(body, "frequency_penalty", p.frequency_penalty);
  if (auto k = get_int(body, "top_k", -1, kIntMax)) p.top_k = static_cast<int>(*k);
  if (auto s = get_int(body, "seed", kInt64Min, kInt64Max)) p.seed = *s;
  if (auto n = get_int(body, "n", kIntMin, kIntMax)) p.n = static_cast<int>(*n);
  if (const Json* ids = get_array(body, "stop_token_ids")) p.stop_token_ids = read_token_ids(*ids, "stop_token_ids");
  if (auto v = get_bool(body, "ignore_eos")) p.ignore_eos = *v;
  if (auto m = get_int(body, "min_tokens", kIntMin, kIntMax)) p.min_tokens = static_cast<int>(*m);
  if (auto k = get_int(body, "prompt_logprobs", kIntMin, kIntMax)) p.prompt_logprobs = static_cast<int>(*k);
  if (auto v = get_bool(body, "include_stop_str_in_output")) p.include_stop_str_in_output = *v;
  if (auto v = get_bool(body, "skip_special_tokens")) p.skip_special_tokens = *v;
  read_logit_bias(body, p);

  if (auto b = get_int(body, "max_reasoning_tokens", 0, kIntMax)) f.max_reasoning_tokens = static_cast<int>(*b);
  f.reasoning_effort = get_string(body, "reasoning_effort");

  f.speculative = get_bool(body, "speculative").value_or(true);
  f.tokens_as_ids = get_bool(body, "return_tokens_as_token_ids").value_or(false);
  if (auto v = get_int(body, "priority", kIntMin, kIntMax)) f.priority = static_cast<int>(*v);
  if (auto salt = get_string(body, "cache_salt")) {
    if (salt->empty()) bad_request("cache_salt", "cache_salt is an empty string; leave it out, or give a salt");
    if (salt->size() > kMaxCacheSaltBytes)
      bad_request("cache_salt",
                  fmt::format("cache_salt has {} bytes; at most {} are allowed", salt->size(), kMaxCacheSaltBytes));
    f.cache_salt = std::move(*salt);
  }
  f.stream = get_bool(body, "stream").value_or(false);
  if (const Json* options = get_object(body, "stream_options")) {
    if (!f.stream)
      bad_request("stream_options", "stream_options is only allowed when stream is true; set stream, or drop it");
    if (const Json* usage = field_of(*options, "include_usage")) {
      if (!usage->is_boolean()) bad_request("stream_options", "stream_options.include_usage must be true or false");
      f.include_usage = usage->get<bool>();
    }
  }
  f.output_format = read_constraint(body);
  return f;
}

void check_model_name(const std::optional<std::string>& name, const ModelContext& model) {
  if (name && *name != model.served_model_name)
    throw ApiError(404,
                   fmt::format("The model `{}` does not exist; this server serves `{}`", *name, model.served_model_name),
                   "model", "model_not_found");
}

void check_num_choices(std::size_t num_prompts, int n, const ModelContext& model) {
  if (n < 1 || n > model.max_n)
    bad_request("n", fmt::format("n = {} is out of range: this server allows 1 to {} completions per prompt "
                                 "(start it with a larger --max-n for more)",
                                 n, model.max_n));
  if (num_prompts * static_cast<std::size_t>(n) > static_cast<std::size_t>(model.max_choices))
    bad_request(num_prompts > 1 ? "prompt" : "n",
                fmt::format("this request asks for {} completions ({} prompts x n = {}); this server takes at most "
                            "{} per request (send several requests, or start it with a larger "
                            "--max-choices-per-request and --max-choices-per-client)",
                            num_prompts * static_cast<std::size_t>(n), num_prompts, n, model.max_choices));
}

GenerationJob begin_job(Endpoint endpoint, RequestFields fields, const ModelContext& model) {
  check_model_name(fields.model, model);
  GenerationJob job;
  job.endpoint = endpoint;
  job.params = std::move(fields.sampling);
  job.stream = fields.stream;
  job.include_usage = fields.include_usage;
  job.speculative = fields.speculative;
  job.tokens_as_ids = fields.tokens_as_ids;
  job.cache_salt = std::move(fields.cache_salt);
  job.param_names = std::move(fields.param_names);
  if (fields.priority != 0 && !model.priority_scheduling)
    bad_request("priority",
                "priority is only honoured when the server schedules by it: start it with "
                "--scheduling-policy priority");
  job.priority = fields.priority;
  if (fields.output_format) {
    const RequestedConstraint& c = *fields.output_format;
    if (model.constraints == nullptr) bad_request(c.param, "this server does not constrain outputs");
    try {
      job.params.constraint = model.constraints->compile(c.spec);
    } catch (const ConstraintError& e) {
      bad_request(c.param, e.what());
    }
  }
  return job;
}

void finish_job(GenerationJob& job, const ModelContext& model, const char* prompt_param) {
  for (const std::vector<TokenId>& prompt : job.prompts) {
    std::optional<RequestProblem> problem = check_request(prompt, job.params, model.vocab_size, model.max_model_len);
    if (!problem) continue;
    switch (problem->kind) {
      case RequestProblem::Kind::kPrompt:
        bad_request(prompt_param, problem->message);
      case RequestProblem::Kind::kContextLength:
        throw ApiError(400, problem->message, prompt_param, "context_length_exceeded");
      case RequestProblem::Kind::kParam: {
        auto renamed = job.param_names.find(problem->param);
        bad_request(renamed == job.param_names.end() ? problem->param : renamed->second, problem->message);
      }
    }
  }
  if (job.stream && job.params.prompt_logprobs)
    bad_request(job.echo ? "echo" : "prompt_logprobs",
                "prompt logprobs (prompt_logprobs, or echo with logprobs) are only returned without stream; drop "
                "one");
}

}  // namespace folio::server
