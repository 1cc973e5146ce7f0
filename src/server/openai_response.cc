#include "server/openai_response.h"

#include <fmt/format.h>

#include <atomic>
#include <random>

#include "tokenizer/utf8.h"

namespace folio::server {
namespace {

// Characters (code points) of UTF-8 text; a stray byte counts as one.
std::int64_t num_chars(const std::string& s) {
  std::int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

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
  return fmt::format("{}-{:016x}{:08x}", prefix, nonce, counter.fetch_add(1) & 0xFFFFFFFFu);
}

ResponseBuilder::ResponseBuilder(const GenerationJob& job, const Tokenizer& tokenizer, std::string model_name,
                                 std::string id, std::int64_t created)
    : job_(job),
      tokenizer_(tokenizer),
      model_(std::move(model_name)),
      id_(std::move(id)),
      created_(created),
      n_(job.params.n),
      chat_(job.endpoint == Endpoint::kChatCompletions) {
  const auto choices = static_cast<std::size_t>(job.num_choices());
  text_.resize(choices);
  finish_.resize(choices);
  offset_.assign(choices, 0);
  logprobs_.assign(choices, Json(nullptr));
  for (std::size_t c = 0; c < choices; ++c) {
    if (job.echo) {
      const std::string& prompt = job.echo_texts[c / static_cast<std::size_t>(n_)];
      text_[c] = prompt;
      offset_[c] = num_chars(prompt);
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
  if (!tokenizer_.vocab().contains(id)) return fmt::format("<unknown token {}>", id);
  std::string piece = tokenizer_.token_to_piece(id, /*render_special=*/true);
  if (utf8::is_valid(piece)) return piece;
  // Part of a character (byte-level BPE splits emoji and CJK): name the bytes.
  std::string out = "bytes:";
  for (unsigned char c : piece) out += fmt::format("\\x{:02x}", c);
  return out;
}

Json ResponseBuilder::envelope(const char* object) const {
  return Json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
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
        top.push_back(Json{{"token", token_text(alt.token)}, {"logprob", alt.logprob}, {"bytes", bytes_json(alt_piece)}});
      }
      content.push_back(Json{{"token", token_text(t.token)},
                             {"logprob", logprob_value(t.logprob)},
                             {"bytes", bytes_json(token_piece)},
                             {"top_logprobs", std::move(top)}});
    }
    return Json{{"content", std::move(content)}, {"refusal", nullptr}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(), offsets = Json::array();
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
    offset += num_chars(piece(t.token, false));
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(offsets)}};
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
      chunk["choices"] = Json::array(
          {Json{{"index", c}, {"text", text_[static_cast<std::size_t>(c)]}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
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
  if (delta.finish_reason) finish_[static_cast<std::size_t>(c)] = finish_reason_name(*delta.finish_reason);
  const bool has_logprobs = job_.logprobs && !delta.logprobs.empty();
  if (delta.text.empty() && !has_logprobs && !delta.finish_reason) return nullptr;
  Json logprobs = logprobs_json(c, delta);
  Json finish = delta.finish_reason ? Json(finish_reason_name(*delta.finish_reason)) : Json(nullptr);
  Json out;
  if (chat_) {
    out = envelope("chat.completion.chunk");
    Json d = Json::object();
    if (!delta.text.empty()) d["content"] = delta.text;
    out["choices"] = Json::array(
        {Json{{"index", c}, {"delta", std::move(d)}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish)}}});
  } else {
    out = envelope("text_completion");
    out["choices"] = Json::array(
        {Json{{"index", c}, {"text", delta.text}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish)}}});
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
  text_[i] += delta.text;
  if (delta.finish_reason) finish_[i] = finish_reason_name(*delta.finish_reason);
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
      choices.push_back(Json{{"index", c},
                             {"message", {{"role", "assistant"}, {"content", text_[c]}, {"refusal", nullptr}}},
                             {"logprobs", logprobs_[c]},
                             {"finish_reason", std::move(finish)}});
    } else {
      choices.push_back(
          Json{{"index", c}, {"text", text_[c]}, {"logprobs", logprobs_[c]}, {"finish_reason", std::move(finish)}});
    }
  }
  out["choices"] = std::move(choices);
  out["usage"] = usage_json(usage);
  return out;
}

}  // namespace folio::server
