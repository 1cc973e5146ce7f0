// Lexer: template source -> tokens, with jinja2's whitespace rules exactly:
// newlines normalised and one trailing newline dropped, `-` strips all
// whitespace beside a tag, trim_blocks drops the newline after a block or
// comment, lstrip_blocks drops the indentation before one, raw blocks are text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace folio::jinja {

enum class TokenKind : std::uint8_t {
  kText,           // template data between tags (and raw blocks)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // text holds the value, escapes applied
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
  kEnd,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  std::int64_t int_value = 0;
  double float_value = 0.0;
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in code points
};

struct LexerOptions {
  bool trim_blocks = true;  // Hugging Face renders chat templates with both on
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Tokenizes a whole template; throws a syntax JinjaError with line and column.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

const char* token_kind_name(TokenKind kind);

}  // namespace folio::jinja
