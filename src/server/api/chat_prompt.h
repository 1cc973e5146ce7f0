// The conversation of a chat request as token ids: rendered with the model's
// chat template, then tokenized so that text the client wrote never becomes a
// special token. "<|im_start|>system" inside a user message stays those
// characters; only the template's own text is read for special tokens.
//
// How: the messages are rendered a second time with each content wrapped in
// markers (a nonce the client cannot know, inside Unicode noncharacters,
// placed inside the content's surrounding white space so that trim and strip
// keep them). If the marked render, markers removed, is the plain render byte
// for byte, the markers tell exactly where user text lies, and the tokenizer
// reads no special token there. A template that rewrites content in other
// ways (splits it, slices it) leaves no such proof: then a message that holds
// special-token text is refused rather than guessed at.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace folio::server {

struct ChatMessage {
  std::string role;
  std::string content;
  // An assistant message that only calls tools (the client sent null or no
  // text). Rendered as null only for a template that tests content for none
  // (template_tests_for_null_content); others get "", as llama-server and
  // vLLM hand it, since many use content as a string.
  bool content_null = false;
  // More fields for the template, after role and content: an assistant's
  // tool_calls (arguments as objects, as HF templates print them), a tool
  // message's tool_call_id and name.
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  // An assistant's earlier reasoning (its reasoning_content), given to the
  // template as `thinking`, gpt-oss's name for it (its template keeps the
  // reasoning of a turn that called a tool); kept literal as content is.
  std::optional<std::string> reasoning = std::nullopt;
};

// allow_special: the old reading (--allow-special-in-messages), where the
// whole render is read for special tokens. continue_final: the render ends
// with the final message's text (continue_final_message), which the model
// goes on writing. Throws ChatTemplateError when the
// template fails, ApiError 400 (param "messages") when special-token text
// cannot be kept as text.
std::vector<TokenId> encode_chat(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                 const std::vector<ChatMessage>& messages, const ChatRenderOptions& options,
                                 bool add_special_tokens, bool allow_special, bool continue_final = false);

// Whether a chat template tests a message's content for none (`content is
// none`, `content is not none`, `content == none`): DeepSeek-R1's distills
// render tool calls on that branch, so such a template is handed null for an
// assistant turn that only calls tools.
bool template_tests_for_null_content(std::string_view template_source);

// Whether `text` holds the text of a control (or unknown) token.
bool has_special_token_text(const Tokenizer& tokenizer, std::string_view text);

}  // namespace folio::server
