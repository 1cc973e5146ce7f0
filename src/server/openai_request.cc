#include "server/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/structured_output.h"
#include "server/utf8_text.h"
#include "tokenizer/jinja/error.h"

namespace folio::server {
namespace {

constexpr int kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions
constexpr std::size_t kMaxStopStrings = 64;
constexpr std::size_t kMaxTemplateKwargs = 64;
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

float as_float(const Json& body, const char* name, float fallback) {
  auto v = get_number(body, name);
  if (!v) return fallback;
  // Finite as a float too: 1e39 is a double but not a float.
  const auto f = static_cast<float>(*v);
  if (!std::isfinite(f)) bad_request(name, fmt::format("{} must be a finite number", name));
  return f;
}

std::vector<std::string> read_stop(const Json& body) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return {};
  if (it->is_string()) return {it->get<std::string>()};
  if (!it->is_array()) bad_request("stop", "stop must be a string or an array of strings");
  if (it->size() > kMaxStopStrings)
    bad_request("stop", fmt::format("stop has {} strings; at most {} are allowed", it->size(), kMaxStopStrings));
  std::vector<std::string> out;
  for (const Json& s : *it) {
    if (!s.is_string()) bad_request("stop", "stop must be a string or an array of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<TokenId> read_token_list(const Json& list, const char* param, std::int64_t vocab_size) {
  std::vector<TokenId> ids;
  ids.reserve(list.size());
  for (const Json& v : list) {
    if (!v.is_number_integer())
      bad_request(param, fmt::format("{} must hold token ids (integers); found {}", param, describe(v)));
    const std::optional<std::int64_t> id = as_int64(v);
    if (!id || *id < 0 || *id >= vocab_size)
      bad_request(param, fmt::format("token id {} in {} is outside the vocabulary: ids must be in [0, {}]", v.dump(),
                                     param, vocab_size - 1));
    ids.push_back(static_cast<TokenId>(*id));
  }
  return ids;
}

// Parameters shared by both endpoints.
SamplingParams read_sampling(const Json& body, const ModelContext& model) {
  SamplingParams p;
  p.temperature = as_float(body, "temperature", p.temperature);
  p.top_p = as_float(body, "top_p", p.top_p);
  p.min_p = as_float(body, "min_p", p.min_p);
  p.repetition_penalty = as_float(body, "repetition_penalty", p.repetition_penalty);
  p.presence_penalty = as_float(body, "presence_penalty", p.presence_penalty);
  p.frequency_penalty = as_float(body, "frequency_penalty", p.frequency_penalty);
  if (auto k = get_int(body, "top_k", -1, kIntMax)) p.top_k = static_cast<int>(*k);
  if (auto s = get_int(body, "seed", kInt64Min, kInt64Max)) p.seed = *s;
  if (auto n = get_int(body, "n", kInt64Min, kInt64Max)) {
    if (*n < 1 || *n > model.max_n)
      bad_request("n", fmt::format("n = {} is out of range: this server allows 1 to {} completions per prompt "
                                   "(start it with a larger --max-n for more)",
                                   *n, model.max_n));
    p.n = static_cast<int>(*n);
  }
  p.stop = read_stop(body);
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) bad_request("stop_token_ids", "stop_token_ids must be an array of token ids");
    p.stop_token_ids = read_token_list(*it, "stop_token_ids", model.vocab_size);
  }
  if (auto v = get_bool(body, "ignore_eos")) p.ignore_eos = *v;
  if (const Json* bias = get_object(body, "logit_bias")) {
    for (const auto& [key, value] : bias->items()) {
      std::size_t used = 0;
      long long id = 0;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != key.size())
        bad_request("logit_bias", fmt::format("logit_bias keys must be token ids written as strings (\"50256\"); "
                                              "got \"{}\"",
                                              key));
      if (!value.is_number() || !std::isfinite(value.get<float>()))
        bad_request("logit_bias", fmt::format("logit_bias[\"{}\"] must be a finite number", key));
      if (id < 0 || id >= model.vocab_size)
        bad_request("logit_bias", fmt::format("logit_bias names token {}, which is outside the vocabulary: ids must "
                                              "be in [0, {}]",
                                              id, model.vocab_size - 1));
      p.logit_bias[static_cast<TokenId>(id)] = value.get<float>();
    }
  }
  return p;
}

void read_stream_flags(const Json& body, GenerationJob& job) {
  job.stream = get_bool(body, "stream").value_or(false);
  if (const Json* options = get_object(body, "stream_options")) {
    if (!job.stream)
      bad_request("stream_options", "stream_options is only allowed when stream is true; set stream, or drop it");
    auto it = options->find("include_usage");
    if (it != options->end() && !it->is_null()) {
      if (!it->is_boolean()) bad_request("stream_options", "stream_options.include_usage must be true or false");
      job.include_usage = it->get<bool>();
    }
  }
}

void check_prompt_length(const std::vector<TokenId>& prompt, const ModelContext& model, const char* param) {
  if (prompt.empty()) bad_request(param, fmt::format("the {} is empty after tokenization; give at least one token", param));
  if (static_cast<std::int64_t>(prompt.size()) >= model.max_model_len)
    bad_request(param, fmt::format("the {} has {} tokens but the context holds {}; shorten it or start the server "
                                   "with a larger --max-model-len",
                                   param, prompt.size(), model.max_model_len));
}

// max_tokens and max_completion_tokens: at least 1.
std::optional<int> read_max_tokens(const Json& body, const char* name) {
  auto m = get_int(body, name, kInt64Min, kIntMax);
  if (m && *m < 1) bad_request(name, fmt::format("{} = {} is out of range: it must be at least 1", name, *m));
  return m ? std::optional<int>(static_cast<int>(*m)) : std::nullopt;
}

// prompts x n, checked before any prompt is tokenized, so that one request
// cannot take the whole queue (nor the CPU to tokenize what it would refuse).
void check_num_choices(std::size_t num_prompts, int n, const ModelContext& model) {
  if (num_prompts * static_cast<std::size_t>(n) > static_cast<std::size_t>(model.max_choices))
    bad_request(num_prompts > 1 ? "prompt" : "n",
                fmt::format("this request asks for {} completions ({} prompts x n = {}); this server takes at most "
                            "{} per request (send several requests, or start it with a larger "
                            "--max-choices-per-request and --max-choices-per-client)",
                            num_prompts * static_cast<std::size_t>(n), num_prompts, n, model.max_choices));
}

void finish_params(GenerationJob& job, const ModelContext& model) {
  if (auto problem = job.params.validate(model.vocab_size)) bad_request("", *problem);
}

std::string message_content(const Json& message, std::size_t i) {
  const std::string where = fmt::format("messages[{}]", i);
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    bad_request("messages", fmt::format("{}.content must be a string or an array of text parts", where));
  std::string joined;
  for (std::size_t j = 0; j < it->size(); ++j) {
    const Json& part = (*it)[j];
    if (!part.is_object()) bad_request("messages", fmt::format("{}.content[{}] must be an object", where, j));
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || type->get<std::string>() != "text")
      bad_request("messages", fmt::format("{}.content[{}]: only parts of type \"text\" are supported, got {}", where, j,
                                          type == part.end() ? std::string("none") : describe(*type)));
    auto text = part.find("text");
    if (text == part.end() || !text->is_string())
      bad_request("messages", fmt::format("{}.content[{}].text must be a string", where, j));
    if (!joined.empty()) joined += '\n';
    joined += text->get<std::string>();
  }
  return joined;
}

// chat_template_kwargs: more template variables, but never one the server
// sets from what it validated, and never special-token text.
nlohmann::ordered_json template_kwargs(const Json& body, const ModelContext& model) {
  const Json* kwargs = get_object(body, "chat_template_kwargs");
  if (kwargs == nullptr) return nlohmann::ordered_json::object();
  if (kwargs->size() > kMaxTemplateKwargs)
    bad_request("chat_template_kwargs", fmt::format("chat_template_kwargs has {} keys; at most {} are allowed",
                                                    kwargs->size(), kMaxTemplateKwargs));
  for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token"})
    if (kwargs->contains(reserved))
      bad_request("chat_template_kwargs",
                  fmt::format("chat_template_kwargs may not set `{}`: the server renders it from the request's own, "
                              "validated fields",
                              reserved));
  if (!model.allow_special_in_messages) {
    // Every string inside, however deep: a template may print any of them.
    std::vector<const Json*> todo = {kwargs};
    while (!todo.empty()) {
      const Json* v = todo.back();
      todo.pop_back();
      if (v->is_string() && has_special_token_text(*model.tokenizer, v->get_ref<const std::string&>()))
        bad_request("chat_template_kwargs",
                    "chat_template_kwargs holds the text of a special token; remove it, or start the server with "
                    "--allow-special-in-messages");
      if (v->is_structured())
        for (const Json& child : *v) todo.push_back(&child);
      if (v->is_object())
        for (const auto& [key, child] : v->items())
          if (has_special_token_text(*model.tokenizer, key))
            bad_request("chat_template_kwargs", "chat_template_kwargs holds the text of a special token in a key");
    }
  }
  return nlohmann::ordered_json(*kwargs);
}

// What both endpoints read alike: the model, sampling, speculation, streaming.
GenerationJob read_common(const Json& body, const ModelContext& model, Endpoint endpoint) {
  check_model_field(body, model);
  GenerationJob job;
  job.endpoint = endpoint;
  job.params = read_sampling(body, model);
  job.speculative = get_bool(body, "speculative").value_or(true);
  read_stream_flags(body, job);
  if (auto c = read_constraint(body)) {
    if (model.constraints == nullptr) bad_request(c->param, "this server does not constrain outputs");
    try {
      job.params.constraint = model.constraints->compile(c->spec);
    } catch (const ConstraintError& e) {
      bad_request(c->param, e.what());
    }
  }
  return job;
}

}  // namespace

void check_model_field(const Json& body, const ModelContext& model) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_string()) bad_request("model", "model must be a string");
  const std::string name = it->get<std::string>();
  if (name != model.served_model_name)
    throw ApiError(404, fmt::format("The model `{}` does not exist; this server serves `{}`", name,
                                    model.served_model_name),
                   "model", "model_not_found");
}

std::vector<TokenId> tokenize_text(const std::string& text, const ModelContext& model, bool add_special_tokens) {
  if (text.empty()) bad_request("prompt", "the prompt is an empty string; give some text");
  return model.tokenizer->encode(text, add_special_tokens, /*parse_special=*/true);
}

std::vector<TokenId> tokenize_chat(const Json& body, const ModelContext& model, bool add_generation_prompt,
                                   bool add_special_tokens) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) bad_request("messages", "messages is required: an array of {role, content}");
  if (!it->is_array() || it->empty())
    bad_request("messages", "messages must be a non-empty array of {role, content} objects");
  std::vector<ChatMessage> messages;
  messages.reserve(it->size());
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    if (!m.is_object()) bad_request("messages", fmt::format("messages[{}] must be an object with role and content", i));
    auto role_it = m.find("role");
    if (role_it == m.end() || !role_it->is_string())
      bad_request("messages", fmt::format("messages[{}].role must be a string", i));
    std::string role = role_it->get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant")
      bad_request("messages", fmt::format("messages[{}].role \"{}\" is not supported; use system, user or assistant",
                                          i, role));
    messages.push_back({std::move(role), message_content(m, i)});
  }
  ChatRenderOptions options = chat_render_options(model.tokenizer->vocab());
  options.add_generation_prompt = add_generation_prompt;
  options.extra = template_kwargs(body, model);
  try {
    return encode_chat(*model.chat_template, *model.tokenizer, messages, options, add_special_tokens,
                       model.allow_special_in_messages);
  } catch (const jinja::JinjaError& e) {
    if (e.kind() == jinja::JinjaError::Kind::kRaised)
      bad_request("messages", fmt::format("the model's chat template rejects this conversation: {}", e.detail()));
    bad_request("messages", fmt::format("the model's chat template could not render this conversation: {}", e.what()));
  }
}

GenerationJob parse_completion_request(const Json& body, const ModelContext& model) {
  GenerationJob job = read_common(body, model, Endpoint::kCompletions);
  job.echo = get_bool(body, "echo").value_or(false);
  if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty())
    bad_request("suffix", "suffix (fill-in-the-middle) is not supported; leave it out");
  if (auto best_of = get_int(body, "best_of", 1, kIntMax); best_of && *best_of != job.params.n)
    bad_request("best_of", "best_of is not supported; leave it out or set it equal to n");
  if (auto lp = get_int(body, "logprobs", 0, kMaxLogprobs)) {
    job.logprobs = true;
    job.params.logprobs = static_cast<int>(*lp);
  }
  if (job.echo && job.logprobs)
    bad_request("echo", "echo together with logprobs is not supported (prompt logprobs are not computed); drop one");
  job.params.max_tokens = read_max_tokens(body, "max_tokens").value_or(kDefaultCompletionMaxTokens);

  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) bad_request("prompt", "prompt is required: a string, a list of strings or token ids");
  const Json& prompt = *it;
  const bool many = prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array());
  check_num_choices(many ? prompt.size() : 1, job.params.n, model);
  if (prompt.is_string()) {
    job.prompts.push_back(tokenize_text(prompt.get<std::string>(), model, true));
    job.echo_texts.push_back(prompt.get<std::string>());
  } else if (prompt.is_array()) {
    if (prompt.empty()) bad_request("prompt", "prompt is an empty list; give at least one prompt");
    const Json& first = prompt[0];
    if (first.is_string()) {
      for (const Json& p : prompt) {
        if (!p.is_string()) bad_request("prompt", "a list prompt must hold only strings, or only token ids");
        job.prompts.push_back(tokenize_text(p.get<std::string>(), model, true));
        job.echo_texts.push_back(p.get<std::string>());
      }
    } else if (first.is_number_integer()) {
      job.prompts.push_back(read_token_list(prompt, "prompt", model.vocab_size));
    } else if (first.is_array()) {
      for (const Json& p : prompt) {
        if (!p.is_array()) bad_request("prompt", "a list of token-id prompts must hold only lists of integers");
        job.prompts.push_back(read_token_list(p, "prompt", model.vocab_size));
      }
    } else {
      bad_request("prompt", "prompt must be a string, a list of strings, a list of token ids or a list of such lists");
    }
    if (job.echo && job.echo_texts.empty())
      for (const auto& ids : job.prompts)
        job.echo_texts.push_back(client_text(model.tokenizer->decode(ids, /*render_special=*/true)));
  } else {
    bad_request("prompt", "prompt must be a string, a list of strings, a list of token ids or a list of such lists");
  }
  for (const auto& p : job.prompts) check_prompt_length(p, model, "prompt");
  if (!job.echo) job.echo_texts.clear();
  finish_params(job, model);
  return job;
}

GenerationJob parse_chat_request(const Json& body, const ModelContext& model) {
  GenerationJob job = read_common(body, model, Endpoint::kChatCompletions);
  check_num_choices(1, job.params.n, model);
  // max_completion_tokens is OpenAI's current name; max_tokens the older one.
  std::optional<int> max_tokens = read_max_tokens(body, "max_tokens");
  if (auto m = read_max_tokens(body, "max_completion_tokens")) max_tokens = m;
  if (max_tokens) job.params.max_tokens = *max_tokens;
  job.logprobs = get_bool(body, "logprobs").value_or(false);
  if (auto top = get_int(body, "top_logprobs", 0, kMaxLogprobs)) {
    if (!job.logprobs && *top > 0) bad_request("top_logprobs", "top_logprobs needs logprobs set to true");
    job.params.logprobs = static_cast<int>(*top);
  }
  if (job.logprobs && !job.params.logprobs) job.params.logprobs = 0;
  if (!job.logprobs) job.params.logprobs.reset();
  if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null() && !(tools->is_array() && tools->empty()))
    bad_request("tools", "tools (function calling) are not supported yet; leave them out");
  const bool add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  job.prompts.push_back(tokenize_chat(body, model, add_generation_prompt, /*add_special_tokens=*/false));
  check_prompt_length(job.prompts[0], model, "messages");
  finish_params(job, model);
  return job;
}

}  // namespace folio::server
