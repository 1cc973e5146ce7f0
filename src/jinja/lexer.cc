// Lexer: jinja2's tokenizer rules, with HF's trim_blocks/lstrip_blocks, byte for byte.
#include "jinja/lexer.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

#include "core/utf8.h"
#include "jinja/error.h"
#include "jinja/string.h"

namespace folio::jinja {

namespace {

// Newlines as jinja2 sees them: \r\n, \r and \n all become \n, and one
// trailing newline goes unless it is kept.
std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's "unicode-escape" decoding of a string literal's body, after
// jinja2 has turned every non-ASCII character into a \x/\u/\U escape.
std::string unescape_literal(std::string_view body) {
  std::string ascii;  // body.encode("ascii", "backslashreplace")
  for (char32_t c : utf8::decode(body)) {
    if (c < 0x80) {
      ascii += static_cast<char>(c);
      continue;
    }
    char buf[16];
    if (c < 0x100) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
    }
    ascii += buf;
  }
  std::string out;
  auto hex_escape = [&](std::size_t& i, int digits, const char* what) {
    std::uint32_t value = 0;
    for (int k = 0; k < digits; ++k) {
      char h = i + 1 + k < ascii.size() ? ascii[i + 1 + k] : '\0';
      int d = (h >= '0' && h <= '9')   ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) throw JinjaError(JinjaError::Kind::kSyntax, std::string("truncated ") + what + " escape");
      value = value * 16 + static_cast<std::uint32_t>(d);
    }
    i += digits;
    if (value > 0x10FFFF) throw JinjaError(JinjaError::Kind::kSyntax, "illegal Unicode character");
    if (value >= 0xD800 && value <= 0xDFFF) {
      throw JinjaError(JinjaError::Kind::kSyntax, "a string literal holds a lone surrogate escape");
    }
    utf8::append(out, value);
  };
  for (std::size_t i = 0; i < ascii.size(); ++i) {
    char c = ascii[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i + 1 >= ascii.size()) throw JinjaError(JinjaError::Kind::kSyntax, "\\ at end of string");
    char e = ascii[++i];
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': hex_escape(i, 2, "\\xXX"); break;
      case 'u': hex_escape(i, 4, "\\uXXXX"); break;
      case 'U': hex_escape(i, 8, "\\UXXXXXXXX"); break;
      case 'N':
        throw JinjaError(JinjaError::Kind::kSyntax,
                         "\\N{...} escapes are not supported; write the character itself");
      default:
        if (e >= '0' && e <= '7') {
          std::uint32_t value = static_cast<std::uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < ascii.size() && ascii[i + 1] >= '0' && ascii[i + 1] <= '7'; ++k) {
            value = value * 8 + static_cast<std::uint32_t>(ascii[++i] - '0');
          }
          utf8::append(out, value);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options)
      : src_(normalize_newlines(source, options.keep_trailing_newline)), options_(options) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_data();
    emit(TokenKind::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(std::size_t pos, const std::string& message) const {
    auto [line, column] = where(pos);
    throw JinjaError(JinjaError::Kind::kSyntax, message, line, column);
  }

  std::pair<int, int> where(std::size_t pos) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    std::size_t line_start = *(it - 1);
    int column = 1 + static_cast<int>(utf8::length(std::string_view(src_).substr(line_start, pos - line_start)));
    return {static_cast<int>(it - line_starts_.begin()), column};
  }

  Token& emit(TokenKind kind, std::string text, std::size_t pos) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    std::tie(t.line, t.column) = where(pos);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  bool starts_with(std::size_t pos, std::string_view s) const {
    return src_.compare(pos, s.size(), s) == 0;
  }

  // Length in bytes of the whitespace code point at pos, or 0.
  std::size_t space_at(std::size_t pos) const {
    if (pos >= src_.size()) return 0;
    auto b = static_cast<unsigned char>(src_[pos]);
    if (b < 0x80) return utf8::is_python_space(b) ? 1 : 0;
    std::size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    char32_t c = utf8::decode(std::string_view(src_).substr(pos, len))[0];
    return utf8::is_python_space(c) ? len : 0;
  }

  std::size_t skip_spaces(std::size_t pos) const {
    while (std::size_t len = space_at(pos)) pos += len;
    return pos;
  }

  // The text before a tag, with the tag's whitespace control applied
  // (jinja2's OptionalLStrip): `-` strips all whitespace, otherwise
  // lstrip_blocks strips a line's indentation before a block or comment.
  void emit_text_before_tag(std::size_t begin, std::size_t end, char sign, bool is_variable) {
    std::string text = src_.substr(begin, end - begin);
    if (sign == '-') {
      text = py_strip(text, std::nullopt, false, true);
    } else if (sign != '+' && options_.lstrip_blocks && !is_variable) {
      std::size_t line_pos = text.rfind('\n');
      line_pos = line_pos == std::string::npos ? 0 : line_pos + 1;
      if (line_pos > 0 || line_starting_) {
        std::string_view tail = std::string_view(text).substr(line_pos);
        if (!tail.empty() && py_isspace_str(tail)) text.resize(line_pos);
      }
    }
    if (!text.empty()) emit(TokenKind::kText, std::move(text), begin);
  }

  void lex_data() {
    std::size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        emit(TokenKind::kText, src_.substr(pos_), pos_);
        pos_ = src_.size();
        return;
      }
      char next = src_[tag + 1];
      if (next == '{' || next == '%' || next == '#') break;
      ++tag;
    }
    const char kind = src_[tag + 1];
    std::size_t p = tag + 2;
    char sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
    emit_text_before_tag(pos_, tag, sign, kind == '{');
    line_starting_ = false;
    if (kind == '%' && lex_raw(tag, p)) return;
    if (kind == '#') {
      lex_comment(tag, p);
      return;
    }
    emit(kind == '{' ? TokenKind::kVariableBegin : TokenKind::kBlockBegin, "", tag);
    pos_ = p;
    lex_tag(kind == '{');
  }

  // {% raw %}...{% endraw %}: the body is text; false when the tag at `p` is not raw.
  bool lex_raw(std::size_t tag, std::size_t p) {
    std::size_t q = skip_spaces(p);
    if (!starts_with(q, "raw")) return false;
    q = skip_spaces(q + 3);
    if (starts_with(q, "-%}")) {
      q = skip_spaces(q + 3);
    } else if (starts_with(q, "%}")) {
      q += 2;
    } else {
      return false;
    }
    line_starting_ = src_[q - 1] == '\n';
    const std::size_t body = q;
    for (std::size_t at = src_.find("{%", body); at != std::string::npos; at = src_.find("{%", at + 1)) {
      std::size_t r = at + 2;
      char sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) sign = src_[r++];
      r = skip_spaces(r);
      if (!starts_with(r, "endraw")) continue;
      r = skip_spaces(r + 6);
      std::size_t end;
      if (starts_with(r, "+%}")) {
        end = r + 3;
      } else if (starts_with(r, "-%}")) {
        end = skip_spaces(r + 3);
      } else if (starts_with(r, "%}")) {
        end = r + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      emit_text_before_tag(body, at, sign, false);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return true;
    }
    fail(tag, "Missing end of raw directive");
  }

  void lex_comment(std::size_t tag, std::size_t p) {
    for (std::size_t q = p; q < src_.size(); ++q) {
      std::size_t end;
      if (starts_with(q, "+#}")) {
        end = q + 3;
      } else if (starts_with(q, "-#}")) {
        end = skip_spaces(q + 3);
      } else if (starts_with(q, "#}")) {
        end = q + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    fail(tag, "Missing end of comment tag");
  }

  // Tokens inside {{ }} or {% %}, up to the end tag. End tags count only
  // when every bracket opened in the tag is closed, as in jinja2.
  void lex_tag(bool is_variable) {
    std::vector<char> balance;
    while (pos_ < src_.size()) {
      if (balance.empty()) {
        std::size_t end = 0;
        if (is_variable) {
          if (starts_with(pos_, "-}}")) {
            end = skip_spaces(pos_ + 3);
          } else if (starts_with(pos_, "}}")) {
            end = pos_ + 2;
          }
        } else if (starts_with(pos_, "+%}")) {
          end = pos_ + 3;
        } else if (starts_with(pos_, "-%}")) {
          end = skip_spaces(pos_ + 3);
        } else if (starts_with(pos_, "%}")) {
          end = pos_ + 2;
          if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
        }
        if (end) {
          emit(is_variable ? TokenKind::kVariableEnd : TokenKind::kBlockEnd, "", pos_);
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      if (std::size_t len = space_at(pos_)) {
        pos_ = skip_spaces(pos_ + len);
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(balance);
    }
  }

  // Digits with single underscores between them ((\d+_)*\d+); returns the end.
  std::size_t digits_end(std::size_t p) const {
    if (p >= src_.size() || !is_digit(src_[p])) return std::string::npos;
    while (true) {
      while (p < src_.size() && is_digit(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  static std::string without_underscores(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c != '_') out += c;
    }
    return out;
  }

  bool lex_number() {
    if (!is_digit(src_[pos_])) return false;
    const std::size_t start = pos_;
    // A float: digits, then a fraction and/or an exponent; not right after a dot.
    if (start == 0 || src_[start - 1] != '.') {
      std::size_t p = digits_end(start);
      std::size_t frac_end = std::string::npos;
      if (p < src_.size() && src_[p] == '.') frac_end = digits_end(p + 1);
      std::size_t after_frac = frac_end != std::string::npos ? frac_end : p;
      std::size_t exp_end = std::string::npos;
      if (after_frac < src_.size() && (src_[after_frac] == 'e' || src_[after_frac] == 'E')) {
        std::size_t q = after_frac + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        exp_end = digits_end(q);
      }
      std::size_t end = exp_end != std::string::npos ? exp_end : frac_end;
      if (end != std::string::npos) {
        std::string text = without_underscores(std::string_view(src_).substr(start, end - start));
        double value = 0;
        auto result = std::from_chars(text.data(), text.data() + text.size(), value);
        if (result.ec != std::errc()) value = std::numeric_limits<double>::infinity();
        emit(TokenKind::kFloat, text, start).float_value = value;
        pos_ = end;
        return true;
      }
    }
    // An integer: 0b/0o/0x digits, decimal digits, or zeros, with single
    // underscores between digits allowed.
    auto run_end = [this](std::size_t p, auto is_digit_of_base) {
      while (true) {
        std::size_t q = p < src_.size() && src_[p] == '_' ? p + 1 : p;
        if (q >= src_.size() || !is_digit_of_base(src_[q])) return p;
        p = q + 1;
      }
    };
    auto is_hex = [](char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
    int base = 10;
    std::size_t p = start + 1;
    if (src_[start] == '0') {
      char prefix = start + 1 < src_.size() ? static_cast<char>(src_[start + 1] | 0x20) : '\0';
      std::size_t based_end = start + 2;
      if (prefix == 'b') {
        based_end = run_end(start + 2, [](char c) { return c == '0' || c == '1'; });
      } else if (prefix == 'o') {
        based_end = run_end(start + 2, [](char c) { return c >= '0' && c <= '7'; });
      } else if (prefix == 'x') {
        based_end = run_end(start + 2, is_hex);
      }
      if (based_end > start + 2) {
        base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
        p = based_end;
      } else {
        p = run_end(start + 1, [](char c) { return c == '0'; });
      }
    } else {
      p = run_end(start + 1, is_digit);
    }
    std::string text = without_underscores(std::string_view(src_).substr(start, p - start));
    std::string_view digits = base == 10 ? std::string_view(text) : std::string_view(text).substr(2);
    std::uint64_t value = 0;
    auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (result.ec != std::errc() || value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(start, "integer literal " + text + " does not fit in 64 bits");
    }
    emit(TokenKind::kInteger, text, start).int_value = static_cast<std::int64_t>(value);
    pos_ = p;
    return true;
  }

  bool lex_name() {
    auto is_name_byte = [this](std::size_t p, bool first) -> std::size_t {
      if (p >= src_.size()) return 0;
      char c = src_[p];
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return 1;
      if (!first && is_digit(c)) return 1;
      auto b = static_cast<unsigned char>(c);
      if (b < 0x80) return 0;
      std::size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      char32_t cp = utf8::decode(std::string_view(src_).substr(p, len))[0];
      return py_is_word_char(cp) ? len : 0;
    };
    std::size_t len = is_name_byte(pos_, true);
    if (!len) return false;
    std::size_t start = pos_;
    pos_ += len;
    while ((len = is_name_byte(pos_, false))) pos_ += len;
    emit(TokenKind::kName, src_.substr(start, pos_ - start), start);
    return true;
  }

  bool lex_string() {
    char quote = src_[pos_];
    if (quote != '\'' && quote != '"') return false;
    std::size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) fail(pos_, "unexpected char '" + std::string(1, quote) + "'");
    std::string value;
    try {
      value = unescape_literal(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1));
    } catch (const JinjaError& e) {
      fail(pos_, e.detail());
    }
    emit(TokenKind::kString, std::move(value), pos_);
    pos_ = p + 1;
    return true;
  }

  void lex_operator(std::vector<char>& balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    std::string op;
    for (std::string_view two : kTwo) {
      if (starts_with(pos_, two)) op = two;
    }
    if (op.empty() && kOne.find(src_[pos_]) != std::string_view::npos) op = std::string(1, src_[pos_]);
    if (op.empty()) {
      std::size_t len = 1;
      auto b = static_cast<unsigned char>(src_[pos_]);
      if (b >= 0x80) len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      fail(pos_, "unexpected char '" + src_.substr(pos_, len) + "'");
    }
    char c = op[0];
    if (op.size() == 1 && (c == '(' || c == '[' || c == '{')) {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (op.size() == 1 && (c == ')' || c == ']' || c == '}')) {
      if (balance.empty()) fail(pos_, "unexpected '" + op + "'");
      char expected = balance.back();
      balance.pop_back();
      if (expected != c) fail(pos_, "unexpected '" + op + "', expected '" + std::string(1, expected) + "'");
    }
    emit(TokenKind::kOperator, op, pos_);
    pos_ += op.size();
  }

  std::string src_;
  LexerOptions options_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  if (!utf8::is_valid(source)) {
    throw JinjaError(JinjaError::Kind::kSyntax, "the template is not valid UTF-8", 1, 1);
  }
  return Lexer(source, options).run();
}

const char* token_kind_name(TokenKind kind) {
  switch (kind) {
    case TokenKind::kText: return "template data";
    case TokenKind::kVariableBegin: return "begin of print statement";
    case TokenKind::kVariableEnd: return "end of print statement";
    case TokenKind::kBlockBegin: return "begin of statement block";
    case TokenKind::kBlockEnd: return "end of statement block";
    case TokenKind::kName: return "name";
    case TokenKind::kString: return "string";
    case TokenKind::kInteger: return "integer";
    case TokenKind::kFloat: return "float";
    case TokenKind::kOperator: return "operator";
    case TokenKind::kEnd: return "end of template";
  }
  return "token";
}

}  // namespace folio::jinja
