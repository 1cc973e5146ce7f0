#include "server/api/tool_conversation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "server/api/tool_call_text.h"

namespace folio::server {
namespace {

bool has(std::string_view source, std::string_view text) { return source.find(text) != std::string_view::npos; }


// An id Mistral's templates take: itself when it is 9 letters and digits,
// else 9 drawn from its hash (FNV-1a), so a call and its result map alike.
std::string mistral_id(const std::string& id) {
  if (id.size() == 9 && std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }))
    return id;
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string out(9, '0');
  for (auto& c : out) c = kDigits[h % 62], h /= 62;
  return out;
}

// For a template that knows no tools: the tools described in the system
// message, calls written into the assistant's text as the model is asked to
// write them, and results handed back as user text.
void describe_tools_in_messages(std::vector<ChatMessage>& messages, const std::optional<ToolRequest>& tools) {
  for (ChatMessage& m : messages) {
    if (m.role == "tool") {
      m.role = "user";
      m.content = "<tool_response>\n" + m.content + "\n</tool_response>";
      m.fields = Json::object();
    } else if (auto calls = m.fields.find("tool_calls"); calls != m.fields.end()) {
      std::string text = m.content_null ? std::string() : m.content;
      const std::string written = tool_calls_as_text(ToolFormat::kGeneric, *calls);
      m.content = text.empty() ? written : text + "\n" + written;
      m.content_null = false;
      m.fields = Json::object();
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

// GLM-4-0414: a call is an assistant turn named by its metadata, a result an
// observation turn.
void glm_history(std::vector<ChatMessage>& messages) {
  std::vector<ChatMessage> out;
  for (ChatMessage& m : messages) {
    if (m.role == "tool") {
      out.push_back(ChatMessage{"observation", m.content});
      continue;
    }
    auto calls = m.fields.find("tool_calls");
    if (calls == m.fields.end()) {
      out.push_back(std::move(m));
      continue;
    }
    if (!m.content_null && !m.content.empty()) out.push_back(ChatMessage{"assistant", m.content});
    for (const Json& c : *calls) {
      ChatMessage turn{"assistant", dump_json(c["function"]["arguments"])};
      turn.fields["metadata"] = c["function"]["name"];
      out.push_back(std::move(turn));
    }
  }
  messages = std::move(out);
}

}  // namespace

std::string tool_calls_as_text(ToolFormat format, const Json& calls) {
  std::string out;
  Json list = Json::array();
  for (const Json& c : calls) {
    const Json& name = c["function"]["name"];
    const Json& args = c["function"]["arguments"];
    list.push_back(Json{{"name", name}, {"arguments", args}});
    switch (format) {
      case ToolFormat::kHermes:
      case ToolFormat::kGeneric:
        out += fmt::format("{}<tool_call>\n{{\"name\": {}, \"arguments\": {}}}\n</tool_call>", out.empty() ? "" : "\n",
                           dump_json(name), dump_json(args));
        break;
      case ToolFormat::kQwenXml: {
        out += fmt::format("{}<tool_call>\n<function={}>\n", out.empty() ? "" : "\n", name.get<std::string>());
        if (args.is_object())
          for (const auto& [key, value] : args.items())
            out += fmt::format("<parameter={}>\n{}\n</parameter>\n", key,
                               value.is_string() ? value.get<std::string>() : dump_json(value));
        out += "</function>\n</tool_call>";
        break;
      }
      case ToolFormat::kMistralArgs:
        out += fmt::format("[TOOL_CALLS]{}[ARGS]{}", name.get<std::string>(), dump_json(args));
        break;
      case ToolFormat::kLlama3:
        out += fmt::format("{}{{\"name\": {}, \"parameters\": {}}}", out.empty() ? "" : "; ", dump_json(name),
                           dump_json(args));
        break;
      case ToolFormat::kPythonic: {
        std::string kwargs;
        if (args.is_object())
          for (const auto& [key, value] : args.items())
            kwargs += (kwargs.empty() ? "" : ", ") + key + "=" + python_literal(value);
        out += fmt::format("{}{}({})", out.empty() ? "[" : ", ", name.get<std::string>(), kwargs);
        break;
      }
      case ToolFormat::kGlm4:
        out += fmt::format("{}{}\n{}", out.empty() ? "" : "\n", name.get<std::string>(), dump_json(args));
        break;
      default: break;  // the list forms below
    }
  }
  switch (format) {
    case ToolFormat::kMistral: return "[TOOL_CALLS]" + dump_json(list);
    case ToolFormat::kGranite: return "<|tool_call|>" + dump_json(list);
    case ToolFormat::kPhi4Mini: return "<|tool_call|>" + dump_json(list) + "<|/tool_call|>";
    case ToolFormat::kPythonic: return out + "]";
    default: return out;
  }
}

void shape_tool_conversation(ToolFormat format, std::string_view source, const std::optional<ToolRequest>& tools,
                             std::vector<ChatMessage>& messages, ChatRenderOptions& options) {
  if (format == ToolFormat::kGeneric) {
    describe_tools_in_messages(messages, tools);
    return;
  }
  if (tools) {
    options.tools = tools->definitions;
    if (has(source, "xml_tools") && !options.extra.contains("xml_tools")) options.extra["xml_tools"] = tools->definitions;
  }
  if (format == ToolFormat::kPhi4Mini && tools) {
    Json functions = Json::array();
    for (const Json& t : tools->definitions) functions.push_back(t["function"]);
    if (messages.empty() || messages.front().role != "system")
      messages.insert(messages.begin(), ChatMessage{"system", "You are a helpful assistant with some tools."});
    messages.front().fields["tools"] = dump_json(functions);
  }
  if (mistral_ids(format)) {
    for (ChatMessage& m : messages) {
      if (auto calls = m.fields.find("tool_calls"); calls != m.fields.end())
        for (Json& c : *calls)
          if (auto id = c.find("id"); id != c.end() && id->is_string()) *id = mistral_id(id->get<std::string>());
      if (auto id = m.fields.find("tool_call_id"); id != m.fields.end() && id->is_string())
        *id = mistral_id(id->get<std::string>());
    }
  }
  if (format == ToolFormat::kGlm4) {
    glm_history(messages);
    return;
  }
  if (!has(source, "tool_calls")) {
    // The template prints an assistant's content only: the calls go there,
    // written as the model writes them.
    for (ChatMessage& m : messages) {
      auto calls = m.fields.find("tool_calls");
      if (calls == m.fields.end()) continue;
      const std::string written = tool_calls_as_text(format, *calls);
      const std::string text = m.content_null ? std::string() : m.content;
      m.content = text.empty() ? written : text + "\n" + written;
      m.content_null = false;
      m.fields.erase("tool_calls");
    }
  }
}

}  // namespace folio::server
