#include "server/api/openai_response.h"

#include <fmt/format.h>

#include <atomic>
#include <random>

#include "server/api/utf8_text.h"

namespace folio::server {
namespace {

Json bytes_json(const std::string& piece) {
  Json bytes = Json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

Json logprob_value(const std::optional<float>& lp) { return lp ? Json(*lp) : Json(nullptr); }

}  // namespace

std::string new_response_id(const char* prefix) {
  static const std::uint64_t nonce = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<std::uint64_t> counter{0};
  return fmt::format("{}{:016x}{:08x}", prefix, nonce, counter.fetch_add(1) & 0xFFFFFFFFu);
}

ResponseBuilder::ResponseBuilder(const GenerationJob& job, const Tokenizer& tokenizer, std::string model_name,
                                 std::string id, std::int64_t created, std::string system_fingerprint)
    : job_(job),
      tokenizer_(tokenizer),
      model_(std::move(model_name)),
      id_(std::move(id)),
      created_(created),
      system_fingerprint_(std::move(system_fingerprint)),
      n_(job.params.n),
      chat_(job.endpoint == Endpoint::kChatCompletions) {
  const auto choices = static_cast<std::size_t>(job.num_choices());
  text_.resize(choices);
  finish_.resize(choices);
  offset_.assign(choices, 0);
  logprobs_.assign(choices, Json(nullptr));
  stop_.assign(choices, Json(nullptr));
  if (chat_) {
    readers_.assign(choices, ChoiceReader(job));
    reasoning_.resize(choices);
    calls_.assign(choices, Json::array());
  }
  prompt_logprobs_.assign(job.prompts.size(), Json(nullptr));
  for (const std::vector<TokenId>& p : job.prompts) first_tokens_.push_back(p.empty() ? -1 : p[0]);
  for (std::size_t c = 0; c < choices; ++c) {
    if (job.echo) {
      const std::string& prompt = job.echo_texts[c / static_cast<std::size_t>(n_)];
      text_[c] = prompt;
      offset_[c] = num_characters(prompt);
    }
    if (!job.logprobs) continue;
    logprobs_[c] = chat_ ? Json{{"content", Json::array()}, {"refusal", nullptr}}
                         : Json{{"tokens", Json::array()},
                                        {"token_logprobs", Json::array()},
                                        {"top_logprobs", Json::array()},
                                        {"text_offset", Json::array()}};
  }
}

std::string ResponseBuilder::piece(TokenId id, bool render_special) const {
  // A model may have more logits than its tokenizer has tokens (padding).
  if (!tokenizer_.vocab().contains(id)) return "";
  return tokenizer_.token_to_piece(id, render_special);
}

std::string ResponseBuilder::token_text(TokenId id) const {
  if (job_.tokens_as_ids) return fmt::format("token_id:{}", id);
  if (!tokenizer_.vocab().contains(id)) return fmt::format("<unknown token {}>", id);
  std::string piece = tokenizer_.token_to_piece(id, /*render_special=*/true);
  if (utf8::is_valid(piece)) return piece;
  // Part of a character (byte-level BPE splits emoji and CJK): name the bytes.
  std::string out = "bytes:";
  for (unsigned char c : piece) out += fmt::format("\\x{:02x}", c);
  return out;
}

std::vector<OutputEvent> ResponseBuilder::read_choice(int choice, const CompletionDelta& delta) {
  return readers_[static_cast<std::size_t>(choice)].read(delta);
}

std::string ResponseBuilder::finish_name(int choice, FinishReason reason) const {
  return readers_.empty() ? std::string(finish_reason_name(reason))
                          : readers_[static_cast<std::size_t>(choice)].finish_name(reason);
}

Json ResponseBuilder::stop_reason_json(const CompletionDelta& delta) {
  if (delta.stop_token) return *delta.stop_token;
  if (!delta.stop_reason.empty()) return delta.stop_reason;
  return nullptr;
}

Json ResponseBuilder::envelope(const char* object) const {
  return Json{{"id", id_},
              {"object", object},
              {"created", created_},
              {"model", model_},
              {"system_fingerprint", system_fingerprint_.empty() ? Json(nullptr) : Json(system_fingerprint_)}};
}

Json ResponseBuilder::logprobs_json(int choice, const CompletionDelta& delta) {
  if (!job_.logprobs) return nullptr;
  if (chat_) {
    Json content = Json::array();
    for (const SampledToken& t : delta.logprobs) {
      const std::string token_piece = piece(t.token, true);
      Json top = Json::array();
      for (const TokenLogprob& alt : t.top_logprobs()) {
        const std::string alt_piece = piece(alt.token, true);
        top.push_back(
            Json{{"token", token_text(alt.token)}, {"logprob", alt.logprob}, {"bytes", bytes_json(alt_piece)}});
      }
      content.push_back(Json{{"token", token_text(t.token)},
                                     {"logprob", logprob_value(t.logprob)},
                                     {"bytes", bytes_json(token_piece)},
                                     {"top_logprobs", std::move(top)}});
    }
    return Json{{"content", std::move(content)}, {"refusal", nullptr}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(),
               top_logprobs = Json::array(), offsets = Json::array();
  std::int64_t& offset = offset_[static_cast<std::size_t>(choice)];
  for (const SampledToken& t : delta.logprobs) {
    const std::string text = token_text(t.token);
    tokens.push_back(text);
    token_logprobs.push_back(logprob_value(t.logprob));
    // OpenAI's legacy shape: the top-n, plus the chosen token when it is not among them.
    Json top = Json::object();
    for (const TokenLogprob& alt : t.top_logprobs()) top[token_text(alt.token)] = alt.logprob;
    if (t.logprob && !top.contains(text)) top[text] = *t.logprob;
    top_logprobs.push_back(std::move(top));
    offsets.push_back(offset);
    offset += num_characters(piece(t.token, false));
  }
  return Json{{"tokens", std::move(tokens)},
                      {"token_logprobs", std::move(token_logprobs)},
                      {"top_logprobs", std::move(top_logprobs)},
                      {"text_offset", std::move(offsets)}};
}

void ResponseBuilder::add_prompt_logprobs(int prompt, std::span<const PromptTokenLogprob> logprobs) {
  // vLLM's shape: null for the first token, then per token a map from token
  // id to logprob, rank and text, holding the prompt's token and the top ones.
  Json all = Json::array({nullptr});
  for (const PromptTokenLogprob& p : logprobs) {
    Json at = Json::object();
    const SampledToken& t = p.token;
    for (int r = 0; r < t.num_top; ++r) {
      const TokenLogprob& alt = t.top[static_cast<std::size_t>(r)];
      at[std::to_string(alt.token)] = {
          {"logprob", alt.logprob}, {"rank", r + 1}, {"decoded_token", token_text(alt.token)}};
    }
    at[std::to_string(t.token)] = {
        {"logprob", logprob_value(t.logprob)}, {"rank", p.rank}, {"decoded_token", token_text(t.token)}};
    all.push_back(std::move(at));
  }
  prompt_logprobs_[static_cast<std::size_t>(prompt)] = std::move(all);
  if (chat_ || !job_.echo || !job_.logprobs) return;
  // Echo with logprobs: the prompt's tokens lead each of its choices, as
  // OpenAI's legacy completions wrote them (the first token's logprob null).
  for (int i = 0; i < n_; ++i) {
    Json& lp = logprobs_[static_cast<std::size_t>(prompt * n_ + i)];
    std::int64_t offset = 0;
    auto push = [&](TokenId token, Json logprob, Json top) {
      lp["tokens"].push_back(token_text(token));
      lp["token_logprobs"].push_back(std::move(logprob));
      lp["top_logprobs"].push_back(std::move(top));
      lp["text_offset"].push_back(offset);
      offset += num_characters(piece(token, false));
    };
    push(first_tokens_[static_cast<std::size_t>(prompt)], nullptr, nullptr);
    for (const PromptTokenLogprob& p : logprobs) {
      Json top = Json::object();
      for (const TokenLogprob& alt : p.token.top_logprobs()) top[token_text(alt.token)] = alt.logprob;
      const std::string text = token_text(p.token.token);
      if (p.token.logprob && !top.contains(text)) top[text] = *p.token.logprob;
      push(p.token.token, logprob_value(p.token.logprob), std::move(top));
    }
  }
}

std::vector<Json> ResponseBuilder::opening_chunks() {
  std::vector<Json> out;
  for (int c = 0; c < job_.num_choices(); ++c) {
    Json chunk;
    if (chat_) {
      chunk = envelope("chat.completion.chunk");
      chunk["choices"] = Json::array({Json{{"index", c},
                                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                           {"logprobs", nullptr},
                                                           {"finish_reason", nullptr}}});
    } else if (job_.echo) {
      chunk = envelope("text_completion");
      chunk["choices"] = Json::array({Json{{"index", c},
                                                           {"text", text_[static_cast<std::size_t>(c)]},
                                                           {"logprobs", nullptr},
                                                           {"finish_reason", nullptr}}});
    } else {
      continue;
    }
    if (job_.include_usage) chunk["usage"] = nullptr;
    out.push_back(std::move(chunk));
  }
  return out;
}

Json ResponseBuilder::chunk(int prompt, const CompletionDelta& delta) {
  const int c = choice_of(prompt, delta);
  std::string content = delta.text, reasoning;
  Json calls = Json::array();
  if (chat_) {
    content.clear();
    for (OutputEvent& e : read_choice(c, delta)) {
      switch (e.kind) {
        case OutputEvent::Kind::kContent:
          content += e.text;
          break;
        case OutputEvent::Kind::kReasoning:
          reasoning += e.text;
          break;
        case OutputEvent::Kind::kCallStart:
          calls.push_back(Json{{"index", e.index},
                                       {"id", std::move(e.id)},
                                       {"type", "function"},
                                       {"function", {{"name", std::move(e.text)}, {"arguments", ""}}}});
          break;
        case OutputEvent::Kind::kArguments:
          if (!calls.empty() && calls.back()["index"] == e.index) {
            calls.back()["function"]["arguments"] = calls.back()["function"]["arguments"].get<std::string>() + e.text;
          } else {
            calls.push_back(Json{{"index", e.index}, {"function", {{"arguments", std::move(e.text)}}}});
          }
          break;
      }
    }
  }
  const std::string finish_text = delta.finish_reason ? finish_name(c, *delta.finish_reason) : std::string();
  if (delta.finish_reason) finish_[static_cast<std::size_t>(c)] = finish_text;
  const bool has_logprobs = job_.logprobs && !delta.logprobs.empty();
  if (content.empty() && reasoning.empty() && calls.empty() && !has_logprobs && !delta.finish_reason) return nullptr;
  Json logprobs = logprobs_json(c, delta);
  Json finish = delta.finish_reason ? Json(finish_text) : Json(nullptr);
  Json out;
  if (chat_) {
    out = envelope("chat.completion.chunk");
    Json d = Json::object();
    if (!reasoning.empty()) d["reasoning_content"] = std::move(reasoning);
    if (!content.empty()) d["content"] = std::move(content);
    if (!calls.empty()) d["tool_calls"] = std::move(calls);
    out["choices"] = Json::array({Json{{"index", c},
                                                       {"delta", std::move(d)},
                                                       {"logprobs", std::move(logprobs)},
                                                       {"finish_reason", std::move(finish)}}});
  } else {
    out = envelope("text_completion");
    out["choices"] = Json::array({Json{
        {"index", c}, {"text", delta.text}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish)}}});
  }
  if (delta.finish_reason) {
    stop_[static_cast<std::size_t>(c)] = stop_reason_json(delta);
    out["choices"][0]["stop_reason"] = stop_[static_cast<std::size_t>(c)];
  }
  if (job_.include_usage) out["usage"] = nullptr;
  return out;
}

Json ResponseBuilder::usage_json(const Usage& u) {
  return Json{{"prompt_tokens", u.prompt_tokens},
                      {"completion_tokens", u.completion_tokens},
                      {"total_tokens", u.prompt_tokens + u.completion_tokens},
                      {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

Json ResponseBuilder::usage_chunk(const Usage& usage) const {
  Json out = envelope(chat_ ? "chat.completion.chunk" : "text_completion");
  out["choices"] = Json::array();
  out["usage"] = usage_json(usage);
  return out;
}

void ResponseBuilder::add(int prompt, const CompletionDelta& delta) {
  const int c = choice_of(prompt, delta);
  const auto i = static_cast<std::size_t>(c);
  if (chat_) {
    for (OutputEvent& e : read_choice(c, delta)) {
      switch (e.kind) {
        case OutputEvent::Kind::kContent:
          text_[i] += e.text;
          break;
        case OutputEvent::Kind::kReasoning:
          reasoning_[i] += e.text;
          break;
        case OutputEvent::Kind::kCallStart:
          calls_[i].push_back(Json{{"id", std::move(e.id)},
                                           {"type", "function"},
                                           {"function", {{"name", std::move(e.text)}, {"arguments", ""}}}});
          break;
        case OutputEvent::Kind::kArguments: {
          Json& args = calls_[i][static_cast<std::size_t>(e.index)]["function"]["arguments"];
          args = args.get<std::string>() + e.text;
          break;
        }
      }
    }
  } else {
    text_[i] += delta.text;
  }
  if (delta.finish_reason) {
    finish_[i] = finish_name(c, *delta.finish_reason);
    stop_[i] = stop_reason_json(delta);
  }
  if (!job_.logprobs || delta.logprobs.empty()) return;
  Json part = logprobs_json(c, delta);
  Json& all = logprobs_[i];
  for (const char* key : {"content", "tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    if (!part.contains(key)) continue;
    for (Json& v : part[key]) all[key].push_back(std::move(v));
  }
}

Json ResponseBuilder::response(const Usage& usage) const {
  Json out = envelope(chat_ ? "chat.completion" : "text_completion");
  Json choices = Json::array();
  for (std::size_t c = 0; c < text_.size(); ++c) {
    Json finish = finish_[c].empty() ? Json(nullptr) : Json(finish_[c]);
    if (chat_) {
      const bool called = !calls_.empty() && !calls_[c].empty();
      Json message = {{"role", "assistant"},
                              {"content", called && text_[c].empty() ? Json(nullptr) : Json(text_[c])},
                              {"refusal", nullptr}};
      if (called) message["tool_calls"] = calls_[c];
      if (job_.reasoning || job_.harmony)
        message["reasoning_content"] = reasoning_[c].empty() ? Json(nullptr) : Json(reasoning_[c]);
      choices.push_back(Json{{"index", c},
                                     {"message", std::move(message)},
                                     {"logprobs", logprobs_[c]},
                                     {"finish_reason", std::move(finish)}});
    } else {
      choices.push_back(Json{
          {"index", c}, {"text", text_[c]}, {"logprobs", logprobs_[c]}, {"finish_reason", std::move(finish)}});
    }
    choices.back()["stop_reason"] = stop_[c];
    if (!chat_ && job_.params.prompt_logprobs)
      choices.back()["prompt_logprobs"] = prompt_logprobs_[c / static_cast<std::size_t>(n_)];
  }
  out["choices"] = std::move(choices);
  if (chat_ && job_.params.prompt_logprobs) out["prompt_logprobs"] = prompt_logprobs_.at(0);
  out["usage"] = usage_json(usage);
  return out;
}

}  // namespace folio::server
