// ChatTemplate: a model's chat template (tokenizer.chat_template), parsed once
// at model load and rendered per request exactly as Hugging Face's
// apply_chat_template renders it; ChatML when the model carries none.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "jinja/template.h"

namespace folio {

class GgufFile;
struct Vocab;

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  // OpenAI-style tool definitions; null renders as the template's `tools`
  // being None (what HF passes when a request has no tools).
  nlohmann::ordered_json tools = nullptr;
  // More template variables (date_string, enable_thinking, ...); they
  // override the ones above, as HF's extra kwargs do.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  // Sandbox bounds. The output bound is raised to 4x the size of the input
  // (messages + tools + extra as JSON) so that long conversations fit.
  jinja::JinjaLimits limits;
  std::optional<std::time_t> now;  // strftime_now()'s clock; unset: the current time
};

// A chat template that does not parse, or cannot render a conversation;
// what() names the template's line and column. kRejected: the template
// itself refused the conversation (raise_exception), and detail() is its own
// words; kRuntime and kLimit: it failed (a bad type, a sandbox bound).
class ChatTemplateError : public Error {
 public:
  enum class Kind { kSyntax, kRuntime, kRejected, kLimit };
  ChatTemplateError(Kind kind, const std::string& message, std::string detail, int line = 0, int column = 0)
      : Error(message), kind_(kind), detail_(std::move(detail)), line_(line), column_(column) {}
  Kind kind() const { return kind_; }
  const std::string& detail() const { return detail_; }
  int line() const { return line_; }  // 1-based in the template; 0: unknown
  int column() const { return column_; }

 private:
  Kind kind_;
  std::string detail_;
  int line_;
  int column_;
};

class ChatTemplate {
 public:
  // The ChatML layout HF used as its default template.
  static const char* const kChatMlSource;

  // Parses `source`; throws ChatTemplateError (kSyntax) with the line and
  // column when it does not parse.
  explicit ChatTemplate(std::string source);
  static ChatTemplate chatml() { return ChatTemplate(kChatMlSource); }
  // The GGUF's tokenizer.chat_template, or ChatML when it has none.
  static ChatTemplate from_gguf(const GgufFile& gguf);
  // A Hugging Face directory's chat_template.jinja, else the chat_template of
  // its tokenizer_config.json (a string, or the one named "default" of a
  // list), else ChatML.
  static ChatTemplate from_hf(const std::string& dir);

  const std::string& source() const { return source_; }

  // Renders `messages` (a JSON array of {role, content, ...}; content may be a
  // string or a list of {type: "text", text} parts, tool_calls may appear).
  // Throws ChatTemplateError: kRejected when the template rejects the
  // conversation (raise_exception), kRuntime/kLimit otherwise.
  std::string render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const;

 private:
  std::string source_;
  std::shared_ptr<const jinja::JinjaTemplate> template_;
};

// Render options whose bos_token and eos_token are the vocab's (empty when
// it has none), the rest at their defaults.
ChatRenderOptions chat_render_options(const Vocab& vocab);

// One-shot convenience: parse `template_source` and render it.
std::string render_chat(const std::string& template_source, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const std::string& bos, const std::string& eos,
                        const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

}  // namespace folio
