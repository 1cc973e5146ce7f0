#include "server/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/http_message.h"
#include "server/reasoning.h"
#include "server/structured_output.h"
#include "server/utf8_text.h"
#include "tokenizer/jinja/error.h"

namespace folio::server {
namespace {

constexpr int kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions
constexpr std::size_t kMaxStopStrings = 64;
constexpr std::size_t kMaxTemplateKwargs = 64;
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kIntMin = std::numeric_limits<int>::min();
constexpr std::size_t kMaxCacheSaltBytes = 1024;
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
  if (auto m = get_int(body, "min_tokens", 0, kIntMax)) p.min_tokens = static_cast<int>(*m);
  if (auto k = get_int(body, "prompt_logprobs", 0, kMaxLogprobs)) p.prompt_logprobs = static_cast<int>(*k);
  if (auto v = get_bool(body, "include_stop_str_in_output")) p.include_stop_str_in_output = *v;
  if (auto v = get_bool(body, "skip_special_tokens")) p.skip_special_tokens = *v;
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
  if (prompt.empty())
    bad_request(param, fmt::format("the {} is empty after tokenization; give at least one token", param));
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
  if (job.stream && job.params.prompt_logprobs)
    bad_request(job.echo ? "echo" : "prompt_logprobs",
                "prompt logprobs (prompt_logprobs, or echo with logprobs) are only returned without stream; drop "
                "one");
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

// Every string inside `v`, keys too, however deep: a template may print any
// of them outside the message markers, so none may hold special-token text.
template <class J>
void refuse_special_text(const J& root, const char* param, const ModelContext& model) {
  if (model.allow_special_in_messages) return;
  std::vector<const J*> todo = {&root};
  while (!todo.empty()) {
    const J* v = todo.back();
    todo.pop_back();
    if (v->is_string() && has_special_token_text(*model.tokenizer, v->template get_ref<const std::string&>()))
      bad_request(param, fmt::format("{} holds the text of a special token; remove it, or start the server with "
                                     "--allow-special-in-messages",
                                     param));
    if (v->is_object())
      for (const auto& [key, child] : v->items())
        if (has_special_token_text(*model.tokenizer, key))
          bad_request(param, fmt::format("{} holds the text of a special token in a key", param));
    if (v->is_structured())
      for (const J& child : *v) todo.push_back(&child);
  }
}

// chat_template_kwargs: more template variables, but never one the server
// sets from what it validated, and never special-token text.
nlohmann::ordered_json template_kwargs(const Json& body, const ModelContext& model) {
  const Json* kwargs = get_object(body, "chat_template_kwargs");
  if (kwargs == nullptr) return model.default_template_kwargs;
  if (kwargs->size() > kMaxTemplateKwargs)
    bad_request("chat_template_kwargs", fmt::format("chat_template_kwargs has {} keys; at most {} are allowed",
                                                    kwargs->size(), kMaxTemplateKwargs));
  for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token"})
    if (kwargs->contains(reserved))
      bad_request("chat_template_kwargs",
                  fmt::format("chat_template_kwargs may not set `{}`: the server renders it from the request's own, "
                              "validated fields",
                              reserved));
  refuse_special_text(*kwargs, "chat_template_kwargs", model);
  nlohmann::ordered_json out = model.default_template_kwargs;
  for (const auto& [key, value] : kwargs->items()) out[key] = nlohmann::ordered_json(value);
  return out;
}

// What both endpoints read alike: the model, sampling, speculation, streaming.
GenerationJob read_common(const Json& body, const ResponseJson& ordered, const ModelContext& model, Endpoint endpoint) {
  check_model_field(body, model);
  GenerationJob job;
  job.endpoint = endpoint;
  job.params = read_sampling(body, model);
  job.speculative = get_bool(body, "speculative").value_or(true);
  job.tokens_as_ids = get_bool(body, "return_tokens_as_token_ids").value_or(false);
  if (auto p = get_int(body, "priority", kIntMin, kIntMax)) {
    if (*p != 0 && !model.priority_scheduling)
      bad_request("priority",
                  "priority is only honoured when the server schedules by it: start it with "
                  "--scheduling-policy priority");
    job.priority = static_cast<int>(*p);
  }
  if (auto salt = get_string(body, "cache_salt")) {
    if (salt->empty()) bad_request("cache_salt", "cache_salt is an empty string; leave it out, or give a salt");
    if (salt->size() > kMaxCacheSaltBytes)
      bad_request("cache_salt",
                  fmt::format("cache_salt has {} bytes; at most {} are allowed", salt->size(), kMaxCacheSaltBytes));
    job.cache_salt = std::move(*salt);
  }
  read_stream_flags(body, job);
  if (auto c = read_constraint(body, ordered)) {
    if (model.constraints == nullptr) bad_request(c->param, "this server does not constrain outputs");
    try {
      job.params.constraint = model.constraints->compile(c->spec);
    } catch (const ConstraintError& e) {
      bad_request(c->param, e.what());
    }
  }
  return job;
}

// An assistant message's tool_calls for the template: each call's
// arguments as an object (HF templates print them with tojson), its id and
// name checked; every string free of special-token text.
ResponseJson read_tool_calls(const Json& calls, const std::string& where, const ModelContext& model) {
  if (!calls.is_array()) bad_request("messages", fmt::format("{}.tool_calls must be an array", where));
  ResponseJson out = ResponseJson::array();
  for (std::size_t j = 0; j < calls.size(); ++j) {
    const Json& c = calls[j];
    const std::string at = fmt::format("{}.tool_calls[{}]", where, j);
    if (!c.is_object()) bad_request("messages", fmt::format("{} must be an object", at));
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) bad_request("messages", fmt::format("{}.function must be an object", at));
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string())
      bad_request("messages", fmt::format("{}.function.name must be a string", at));
    ResponseJson arguments = ResponseJson::object();
    if (auto args = fn->find("arguments"); args != fn->end() && !args->is_null()) {
      if (args->is_string()) {
        std::optional<ResponseJson> parsed = parse_ordered(args->get_ref<const std::string&>());
        if (!parsed)
          bad_request("messages", fmt::format("{}.function.arguments is not valid JSON (each key once)", at));
        arguments = std::move(*parsed);
      } else if (args->is_object()) {
        arguments = ResponseJson(*args);
      } else {
        bad_request("messages", fmt::format("{}.function.arguments must be a JSON string", at));
      }
    }
    ResponseJson call = ResponseJson::object();
    if (auto id = c.find("id"); id != c.end() && !id->is_null()) {
      if (!id->is_string()) bad_request("messages", fmt::format("{}.id must be a string", at));
      call["id"] = id->get<std::string>();
    }
    call["type"] = "function";
    call["function"] = ResponseJson{{"name", name->get<std::string>()}, {"arguments", std::move(arguments)}};
    out.push_back(std::move(call));
  }
  refuse_special_text(out, "messages", model);
  return out;
}

ChatMessage read_message(const Json& m, std::size_t i, const ModelContext& model) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad_request("messages", fmt::format("{} must be an object with role and content", where));
  auto role_it = m.find("role");
  if (role_it == m.end() || !role_it->is_string())
    bad_request("messages", fmt::format("{}.role must be a string", where));
  ChatMessage message;
  message.role = role_it->get<std::string>();
  if (message.role == "developer") message.role = "system";  // OpenAI's newer name for the system role
  if (message.role != "system" && message.role != "user" && message.role != "assistant" && message.role != "tool")
    bad_request("messages", fmt::format("{}.role \"{}\" is not supported; use system, user, assistant or tool", where,
                                        printable(message.role, 64)));
  message.content = message_content(m, i);
  if (message.role == "assistant") {
    if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null() && !calls->empty()) {
      message.fields["tool_calls"] = read_tool_calls(*calls, where, model);
      auto content = m.find("content");
      message.content_null = content == m.end() || content->is_null();
    }
  } else if (message.role == "tool") {
    for (const char* key : {"tool_call_id", "name"}) {
      auto v = m.find(key);
      if (v == m.end() || v->is_null()) continue;
      if (!v->is_string()) bad_request("messages", fmt::format("{}.{} must be a string", where, key));
      message.fields[key] = v->get<std::string>();
    }
    refuse_special_text(message.fields, "messages", model);
  }
  return message;
}

// For a template that knows no tools: the tools described in the system
// message, calls written into the assistant's text as the model is asked to
// write them, and results handed back as user text.
void describe_tools_in_messages(std::vector<ChatMessage>& messages, const std::optional<ToolRequest>& tools) {
  for (ChatMessage& m : messages) {
    if (m.role == "tool") {
      m.role = "user";
      m.content = "<tool_response>\n" + m.content + "\n</tool_response>";
      m.fields = ResponseJson::object();
    } else if (auto calls = m.fields.find("tool_calls"); calls != m.fields.end()) {
      std::string text = m.content_null ? std::string() : m.content;
      for (const ResponseJson& c : *calls) {
        if (!text.empty()) text += '\n';
        text += fmt::format("<tool_call>\n{{\"name\": {}, \"arguments\": {}}}\n</tool_call>",
                            dump_json(c["function"]["name"]), dump_json(c["function"]["arguments"]));
      }
      m.content = std::move(text);
      m.content_null = false;
      m.fields = ResponseJson::object();
    }
  }
  if (!tools) return;
  const std::string prompt = generic_tools_prompt(*tools);
  if (!messages.empty() && messages.front().role == "system") {
    messages.front().content += "\n\n" + prompt;
  } else {
    messages.insert(messages.begin(), ChatMessage{"system", prompt});
  }
}

// The conversation in `messages`, with the request's tools, rendered and
// tokenized.
std::vector<TokenId> encode_conversation(const Json& body, const std::optional<ToolRequest>& tools,
                                         const ModelContext& model, bool add_generation_prompt,
                                         bool add_special_tokens) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) bad_request("messages", "messages is required: an array of {role, content}");
  if (!it->is_array() || it->empty())
    bad_request("messages", "messages must be a non-empty array of {role, content} objects");
  std::vector<ChatMessage> messages;
  messages.reserve(it->size());
  for (std::size_t i = 0; i < it->size(); ++i) messages.push_back(read_message((*it)[i], i, model));
  const bool continue_final = get_bool(body, "continue_final_message").value_or(false);
  if (continue_final && add_generation_prompt)
    bad_request("continue_final_message",
                "continue_final_message continues the last message, and add_generation_prompt starts a new one; "
                "set add_generation_prompt to false");
  if (continue_final && messages.back().role != "assistant")
    bad_request("continue_final_message", "continue_final_message needs the final message to be the assistant's");
  ChatRenderOptions options = chat_render_options(model.tokenizer->vocab());
  options.add_generation_prompt = add_generation_prompt;
  options.extra = template_kwargs(body, model);
  if (model.tool_format == ToolFormat::kGeneric) {
    describe_tools_in_messages(messages, tools);
  } else if (tools) {
    refuse_special_text(tools->definitions, "tools", model);
    options.tools = tools->definitions;
  }
  try {
    return encode_chat(*model.chat_template, *model.tokenizer, messages, options, add_special_tokens,
                       model.allow_special_in_messages, continue_final);
  } catch (const jinja::JinjaError& e) {
    if (e.kind() == jinja::JinjaError::Kind::kRaised)
      bad_request("messages", fmt::format("the model's chat template rejects this conversation: {}", e.detail()));
    bad_request("messages", fmt::format("the model's chat template could not render this conversation: {}", e.what()));
  }
}

}  // namespace

void check_model_field(const Json& body, const ModelContext& model) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_string()) bad_request("model", "model must be a string");
  const std::string name = it->get<std::string>();
  if (name != model.served_model_name)
    throw ApiError(404,
                   fmt::format("The model `{}` does not exist; this server serves `{}`", name, model.served_model_name),
                   "model", "model_not_found");
}

std::vector<TokenId> tokenize_text(const std::string& text, const ModelContext& model, bool add_special_tokens) {
  if (text.empty()) bad_request("prompt", "the prompt is an empty string; give some text");
  return model.tokenizer->encode(text, add_special_tokens, /*parse_special=*/true);
}

std::vector<TokenId> tokenize_chat(const Json& body, const ResponseJson& ordered, const ModelContext& model,
                                   bool add_generation_prompt, bool add_special_tokens) {
  return encode_conversation(body, read_tools(body, ordered), model, add_generation_prompt, add_special_tokens);
}

GenerationJob parse_completion_request(const Json& body, const ResponseJson& ordered, const ModelContext& model) {
  GenerationJob job = read_common(body, ordered, model, Endpoint::kCompletions);
  job.echo = get_bool(body, "echo").value_or(false);
  if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty())
    bad_request("suffix", "suffix (fill-in-the-middle) is not supported; leave it out");
  if (auto best_of = get_int(body, "best_of", 1, kIntMax); best_of && *best_of != job.params.n)
    bad_request("best_of", "best_of is not supported; leave it out or set it equal to n");
  if (auto lp = get_int(body, "logprobs", 0, kMaxLogprobs)) {
    job.logprobs = true;
    job.params.logprobs = static_cast<int>(*lp);
  }
  // Echo with logprobs scores the prompt too (its first token has none).
  if (job.echo && job.logprobs && !job.params.prompt_logprobs) job.params.prompt_logprobs = job.params.logprobs;
  job.params.max_tokens = read_max_tokens(body, "max_tokens").value_or(kDefaultCompletionMaxTokens);

  auto it = body.find("prompt");
  if (it == body.end() || it->is_null())
    bad_request("prompt", "prompt is required: a string, a list of strings or token ids");
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

GenerationJob parse_chat_request(const Json& body, const ResponseJson& ordered, const ModelContext& model) {
  GenerationJob job = read_common(body, ordered, model, Endpoint::kChatCompletions);
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
  job.tools = read_tools(body, ordered);
  job.tool_format = model.tool_format;
  if (job.tools) {
    if (auto spec = tool_constraint(*job.tools, model.tool_format)) {
      if (job.params.constraint) {
        // Forced calls and a response format cannot both hold; with auto the
        // response format wins and calls are still read from the output.
        if (job.tools->choice != ToolRequest::Choice::kAuto)
          bad_request("tool_choice",
                      "tool_choice forces a tool call, which a response_format cannot also constrain; "
                      "give one of them");
      } else {
        if (model.constraints == nullptr) bad_request("tools", "this server does not constrain outputs");
        try {
          job.params.constraint = model.constraints->compile(*spec);
        } catch (const ConstraintError& e) {
          bad_request("tools", e.what());
        }
      }
    }
  }
  const bool add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  job.prompts.push_back(
      encode_conversation(body, job.tools, model, add_generation_prompt, /*add_special_tokens=*/false));
  check_prompt_length(job.prompts[0], model, "messages");
  job.reasoning = model.reasoning;
  if (job.reasoning) {
    // The prompt's last tokens say whether the template opened <think> for the model.
    const std::vector<TokenId>& p = job.prompts[0];
    const std::vector<TokenId> tail(p.end() - std::min<std::ptrdiff_t>(16, static_cast<std::ptrdiff_t>(p.size())),
                                    p.end());
    job.reasoning_starts_inside = prompt_opens_thinking(model.tokenizer->decode(tail, /*render_special=*/true));
  }
  finish_params(job, model);
  return job;
}

}  // namespace folio::server
