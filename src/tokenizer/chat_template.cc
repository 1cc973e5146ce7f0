// ChatTemplate: the variables HF's apply_chat_template passes, around JinjaTemplate.
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "jinja/error.h"
#include "jinja/json.h"
#include "model/gguf_file.h"
#include "tokenizer/vocab.h"

namespace folio {
namespace {

// The template engine's error in ChatTemplate's words.
ChatTemplateError chat_template_error(const jinja::JinjaError& e) {
  using K = ChatTemplateError::Kind;
  K kind = K::kRuntime;
  switch (e.kind()) {
    case jinja::JinjaError::Kind::kSyntax:
      kind = K::kSyntax;
      break;
    case jinja::JinjaError::Kind::kRaised:
      kind = K::kRejected;
      break;
    case jinja::JinjaError::Kind::kLimit:
      kind = K::kLimit;
      break;
    case jinja::JinjaError::Kind::kRuntime:
      break;
  }
  return ChatTemplateError(kind, e.what(), e.detail(), e.line(), e.column());
}

std::shared_ptr<const jinja::JinjaTemplate> parse(const std::string& source) {
  try {
    return std::make_shared<const jinja::JinjaTemplate>(source);
  } catch (const jinja::JinjaError& e) {
    throw chat_template_error(e);
  }
}

}  // namespace

const char* const ChatTemplate::kChatMlSource =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), template_(parse(source_)) {}

ChatTemplate ChatTemplate::from_gguf(const GgufFile& gguf) {
  std::string source = gguf.get_string("tokenizer.chat_template", "");
  return source.empty() ? chatml() : ChatTemplate(std::move(source));
}

ChatTemplate ChatTemplate::from_hf(const std::string& dir) {
  const std::filesystem::path root(dir);
  auto read = [](const std::filesystem::path& path) -> std::optional<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  if (auto jinja = read(root / "chat_template.jinja")) return ChatTemplate(std::move(*jinja));
  const auto config_text = read(root / "tokenizer_config.json");
  if (!config_text) return chatml();
  const auto config = nlohmann::json::parse(*config_text, nullptr, /*allow_exceptions=*/false);
  const std::string source = (root / "tokenizer_config.json").string();
  if (config.is_discarded() || !config.is_object()) fail("{} is not a well-formed JSON object", source);
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return chatml();
  if (it->is_string()) return ChatTemplate(it->get<std::string>());
  if (it->is_array()) {
    for (const auto& entry : *it)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return ChatTemplate(entry["template"].get<std::string>());
    fail("{}: chat_template lists no template named \"default\"", source);
  }
  fail("{}: chat_template is neither a string nor a list of named templates", source);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const {
  using jinja::Value;
  if (!messages.is_array()) {
    const std::string detail =
        std::string("messages must be a JSON array of {role, content} objects, not ") + messages.type_name();
    throw ChatTemplateError(ChatTemplateError::Kind::kRuntime, detail, detail);
  }
  if (!options.extra.is_object() && !options.extra.is_null()) {
    const std::string detail =
        std::string("extra template variables must be a JSON object, not ") + options.extra.type_name();
    throw ChatTemplateError(ChatTemplateError::Kind::kRuntime, detail, detail);
  }
  // The variables HF passes: messages, tools, documents, add_generation_prompt,
  // the special tokens, then the caller's extra kwargs.
  std::vector<std::pair<std::string, Value>> variables = {
      {"messages", jinja::value_from_json(messages)},
      {"tools", jinja::value_from_json(options.tools)},
      {"documents", Value::none()},
      {"add_generation_prompt", Value::boolean(options.add_generation_prompt)},
      {"bos_token", Value::string(options.bos_token)},
      {"eos_token", Value::string(options.eos_token)},
  };
  std::size_t input_bytes = messages.dump().size() + options.tools.dump().size();
  if (options.extra.is_object()) {
    input_bytes += options.extra.dump().size();
    for (const auto& [name, value] : options.extra.items()) {
      variables.emplace_back(name, jinja::value_from_json(value));
    }
  }
  jinja::RenderOptions render_options;
  render_options.limits = options.limits;
  render_options.limits.max_output_bytes = std::max(options.limits.max_output_bytes, 4 * input_bytes);
  render_options.now = options.now;
  try {
    return template_->render(variables, render_options);
  } catch (const jinja::JinjaError& e) {
    throw chat_template_error(e);
  }
}

ChatRenderOptions chat_render_options(const Vocab& vocab) {
  ChatRenderOptions options;
  if (vocab.bos_id >= 0) options.bos_token = vocab.tokens[static_cast<std::size_t>(vocab.bos_id)];
  if (vocab.eos_id >= 0) options.eos_token = vocab.tokens[static_cast<std::size_t>(vocab.eos_id)];
  return options;
}

std::string render_chat(const std::string& template_source, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const std::string& bos, const std::string& eos,
                        const nlohmann::ordered_json& extra) {
  ChatRenderOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = bos;
  options.eos_token = eos;
  options.extra = extra;
  return ChatTemplate(template_source).render(messages, options);
}

}  // namespace folio
