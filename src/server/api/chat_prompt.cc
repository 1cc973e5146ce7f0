#include "server/api/chat_prompt.h"

#include <fmt/format.h>

#include <optional>
#include <random>
#include <regex>

#include "core/utf8.h"
#include "server/api/api_error.h"
#include "server/api/stream_text.h"

namespace folio::server {
namespace {

// U+FDD0..U+FDD3: noncharacters, which no tokenizer gives a meaning.
constexpr std::string_view kOpenLead = "\xEF\xB7\x90";
constexpr std::string_view kOpenTail = "\xEF\xB7\x91";
constexpr std::string_view kCloseLead = "\xEF\xB7\x92";
constexpr std::string_view kCloseTail = "\xEF\xB7\x93";

struct Markers {
  std::string nonce, open, close;
};

Markers new_markers() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  Markers m;
  m.nonce = fmt::format("{:016x}{:016x}", rng(), rng());
  m.open = fmt::format("{}{}{}", kOpenLead, m.nonce, kOpenTail);
  m.close = fmt::format("{}{}{}", kCloseLead, m.nonce, kCloseTail);
  return m;
}

// Content with the markers inside its leading and trailing white space
// (Python's definition, as trim and strip use it).
std::string wrap(const std::string& content, const Markers& m) {
  std::size_t begin = content.size(), end = 0;
  for (std::size_t pos = 0; pos < content.size();) {
    const std::size_t at = pos;
    if (utf8::is_python_space(utf8::decode_lenient(content, pos))) continue;
    if (begin == content.size()) begin = at;
    end = pos;
  }
  if (begin == content.size()) return content;  // white space only: nothing to protect
  return content.substr(0, begin) + m.open + content.substr(begin, end - begin) + m.close + content.substr(end);
}

nlohmann::ordered_json messages_json(const std::vector<ChatMessage>& messages, const Markers* markers) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) {
    nlohmann::ordered_json message = {{"role", m.role}};
    message["content"] = m.content_null ? nlohmann::ordered_json(nullptr)
                                        : nlohmann::ordered_json(markers ? wrap(m.content, *markers) : m.content);
    for (const auto& [key, value] : m.fields.items()) message[key] = value;
    if (m.reasoning) message["thinking"] = markers ? wrap(*m.reasoning, *markers) : *m.reasoning;
    out.push_back(std::move(message));
  }
  return out;
}

struct Unmarked {
  std::string text;
  std::vector<TextRange> literal;
};

// The marked render without its markers, and where the marked text lies;
// nullopt when the markers are not whole, in order, pairs.
std::optional<Unmarked> unmark(const std::string& marked, const Markers& m) {
  Unmarked out;
  out.text.reserve(marked.size());
  std::size_t pos = 0;
  for (;;) {
    const std::size_t open = marked.find(m.open, pos);
    const std::size_t close = marked.find(m.close, pos);
    if (open == std::string::npos) {
      if (close != std::string::npos) return std::nullopt;
      out.text.append(marked, pos);
      break;
    }
    if (close == std::string::npos || close < open) return std::nullopt;
    const std::size_t inner = open + m.open.size();
    if (marked.find(m.open, inner) < close) return std::nullopt;
    out.text.append(marked, pos, open - pos);
    const std::size_t begin = out.text.size();
    out.text.append(marked, inner, close - inner);
    if (out.text.size() > begin) out.literal.push_back({begin, out.text.size()});
    pos = close + m.close.size();
  }
  // A marker cut in pieces (a template that slices content) leaves its nonce.
  if (out.text.find(m.nonce) != std::string::npos) return std::nullopt;
  return out;
}

}  // namespace

bool template_tests_for_null_content(std::string_view template_source) {
  // content, content'] or content"] before the test; Jinja's none is also spelled None.
  static const std::regex kTest(R"(content['"]?\]?\s*(is\s+(not\s+)?none|[!=]=\s*none)\b)", std::regex::icase);
  return std::regex_search(template_source.begin(), template_source.end(), kTest);
}

bool has_special_token_text(const Tokenizer& tokenizer, std::string_view text) {
  const Vocab& vocab = tokenizer.vocab();
  for (TokenId id : tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/true))
    if (vocab.contains(id) && (vocab.attrs[static_cast<std::size_t>(id)] & (kAttrControl | kAttrUnknown)) != 0)
      return true;
  return false;
}

// continue_final_message: the render ends where the final message's text
// does (its end-of-turn and whatever follows cut off), so that the model
// goes on writing that message. Found as its last occurrence, white space
// at its end aside (templates trim it).
std::size_t continuation_cut(const std::string& render, const std::vector<ChatMessage>& messages) {
  const std::string_view text = trim_right(messages.back().content);
  const std::size_t at = text.empty() ? std::string::npos : render.rfind(text);
  if (at == std::string::npos)
    bad_request("continue_final_message",
                "the chat template does not print the final message's text as it is, so it cannot be continued; "
                "send it with text, or leave continue_final_message out");
  return at + text.size();
}

std::vector<TokenId> encode_chat(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                 const std::vector<ChatMessage>& messages, const ChatRenderOptions& options,
                                 bool add_special_tokens, bool allow_special, bool continue_final) {
  std::string plain = chat_template.render(messages_json(messages, nullptr), options);
  const std::size_t cut = continue_final ? continuation_cut(plain, messages) : plain.size();
  if (allow_special) return tokenizer.encode(std::string_view(plain).substr(0, cut), add_special_tokens, true);

  const Markers markers = new_markers();
  const std::string marked = chat_template.render(messages_json(messages, &markers), options);
  std::optional<Unmarked> unmarked = unmark(marked, markers);
  if (unmarked && unmarked->text == plain) {
    std::vector<TextRange> literal;
    for (const TextRange& r : unmarked->literal)
      if (r.begin < cut) literal.push_back({r.begin, std::min(r.end, cut)});
    return tokenizer.encode(std::string_view(plain).substr(0, cut), add_special_tokens, /*parse_special=*/true,
                            literal);
  }

  // The template changed the content on its way: without knowing where it
  // went, only content with no special-token text is safe to render.
  for (std::size_t i = 0; i < messages.size(); ++i)
    if (has_special_token_text(tokenizer, messages[i].content))
      bad_request("messages",
                  fmt::format("messages[{}].content holds the text of a special token, and this model's chat "
                              "template rewrites message text in a way that cannot keep it as text; remove it, or "
                              "start the server with --allow-special-in-messages",
                              i));
  return tokenizer.encode(std::string_view(plain).substr(0, cut), add_special_tokens, /*parse_special=*/true);
}

}  // namespace folio::server
