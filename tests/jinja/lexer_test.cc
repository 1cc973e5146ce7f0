// The lexer: token kinds and values, jinja2's whitespace rules (as Hugging
// Face configures them) and syntax errors with their line and column.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jinja/error.h"
#include "jinja/lexer.h"

namespace folio::jinja {
namespace {

// "kind:text" for each token but the end, e.g. "name:x".
std::vector<std::string> describe(const std::string& source, const LexerOptions& options = {}) {
  std::vector<std::string> out;
  for (const Token& t : tokenize(source, options)) {
    switch (t.kind) {
      case TokenKind::kText: out.push_back("text:" + t.text); break;
      case TokenKind::kVariableBegin: out.push_back("{{"); break;
      case TokenKind::kVariableEnd: out.push_back("}}"); break;
      case TokenKind::kBlockBegin: out.push_back("{%"); break;
      case TokenKind::kBlockEnd: out.push_back("%}"); break;
      case TokenKind::kName: out.push_back("name:" + t.text); break;
      case TokenKind::kString: out.push_back("string:" + t.text); break;
      case TokenKind::kInteger: out.push_back("int:" + std::to_string(t.int_value)); break;
      case TokenKind::kFloat: out.push_back("float:" + t.text); break;
      case TokenKind::kOperator: out.push_back("op:" + t.text); break;
      case TokenKind::kEnd: break;
    }
  }
  return out;
}

// The text tokens only: what a template without expressions renders.
std::string texts(const std::string& source, const LexerOptions& options = {}) {
  std::string out;
  for (const Token& t : tokenize(source, options)) {
    if (t.kind == TokenKind::kText) out += t.text + "|";
  }
  return out;
}

JinjaError lex_error(const std::string& source) {
  try {
    tokenize(source);
  } catch (const JinjaError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << source;
  return JinjaError(JinjaError::Kind::kSyntax, "none");
}

TEST(JinjaLexer, TokensOfAnExpression) {
  using V = std::vector<std::string>;
  EXPECT_EQ(describe("a{{ m.x[0] | f(1, 'y') }}b"),
            (V{"text:a", "{{", "name:m", "op:.", "name:x", "op:[", "int:0", "op:]", "op:|", "name:f", "op:(", "int:1",
               "op:,", "string:y", "op:)", "}}", "text:b"}));
  EXPECT_EQ(describe("{% if a // b ** 2 != c %}"),
            (V{"{%", "name:if", "name:a", "op://", "name:b", "op:**", "int:2", "op:!=", "name:c", "%}"}));
}

TEST(JinjaLexer, NumbersAsPythonWritesThem) {
  using V = std::vector<std::string>;
  EXPECT_EQ(describe("{{ 1_000 0x1F 0o17 0b101 007 }}"),
            (V{"{{", "int:1000", "int:31", "int:15", "int:5", "int:0", "int:7", "}}"}));
  EXPECT_EQ(describe("{{ 1.5 2e3 1_0.5E-1 x.0 }}"),
            (V{"{{", "float:1.5", "float:2e3", "float:10.5E-1", "name:x", "op:.", "int:0", "}}"}));
}

TEST(JinjaLexer, StringEscapesArePythonUnicodeEscapes) {
  auto value = [](const std::string& literal) { return tokenize("{{ " + literal + " }}")[1].text; };
  EXPECT_EQ(value(R"('a\tb\n')"), "a\tb\n");
  EXPECT_EQ(value(R"('\x41\u00e9\U0001F600\101')"), "Aé😀A");
  EXPECT_EQ(value(R"("it's \"q\" \\ \q")"), "it's \"q\" \\ \\q");  // unknown escapes stay
  EXPECT_EQ(value("'é\\é'"), "é\\xe9");  // jinja2 escapes non-ASCII first, so \é is \\xe9
  EXPECT_EQ(value("'line\nbreak'"), "line\nbreak");
}

TEST(JinjaLexer, UnicodeWhitespaceSeparatesTokens) {
  using V = std::vector<std::string>;
  EXPECT_EQ(describe("{{\u00a0x\u3000}}"), (V{"{{", "name:x", "}}"}));
}

TEST(JinjaLexer, NewlinesAreNormalisedAndOneTrailingNewlineGoes) {
  EXPECT_EQ(texts("a\r\nb\rc\n"), "a\nb\nc|");
  EXPECT_EQ(texts("a\n\n"), "a\n|");
  LexerOptions keep;
  keep.keep_trailing_newline = true;
  EXPECT_EQ(texts("a\n", keep), "a\n|");
}

TEST(JinjaLexer, TrimBlocksDropsTheNewlineAfterABlockOrComment) {
  EXPECT_EQ(texts("{% if x %}\nA{# c #}\nB{{ y }}\nC"), "A|B|\nC|");
  EXPECT_EQ(texts("{% if x +%}\nA"), "\nA|");
  LexerOptions off;
  off.trim_blocks = false;
  EXPECT_EQ(texts("{% if x %}\nA", off), "\nA|");
}

TEST(JinjaLexer, LstripBlocksDropsIndentationBeforeABlockOrComment) {
  EXPECT_EQ(texts("a\n  \t{% if x %}b"), "a\n|b|");
  EXPECT_EQ(texts("a\n \u00a0{# c #}b"), "a\n|b|");  // \s matches Unicode spaces
  EXPECT_EQ(texts("a\n  {{ x }}"), "a\n  |");          // not before a variable
  EXPECT_EQ(texts("a\n x {% if x %}"), "a\n x |");     // not after other text
  EXPECT_EQ(texts("a\n  {%+ if x %}"), "a\n  |");      // + keeps it
  LexerOptions off;
  off.lstrip_blocks = false;
  EXPECT_EQ(texts("a\n  {% if x %}", off), "a\n  |");
}

TEST(JinjaLexer, MinusStripsAllWhitespaceBesideATag) {
  EXPECT_EQ(texts("a \n\t{%- if x -%} \n b"), "a|b|");
  EXPECT_EQ(texts("a\u3000{{- x -}}\u00a0\nb"), "a|b|");
  EXPECT_EQ(texts("a {#- c -#} b"), "a|b|");
}

TEST(JinjaLexer, RawBlocksAreText) {
  EXPECT_EQ(texts("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}|");
  EXPECT_EQ(texts("{% raw %}\n a \n{% endraw %}\nb"), "\n a \n|b|");  // trim after endraw only
  EXPECT_EQ(texts("x  {%- raw -%}  a  {%- endraw -%}  y"), "x|a|y|");
}

TEST(JinjaLexer, EndTagsCountOnlyOutsideBrackets) {
  using V = std::vector<std::string>;
  EXPECT_EQ(describe("{{ {'a': {'b': 1}} }}"),
            (V{"{{", "op:{", "string:a", "op::", "op:{", "string:b", "op::", "int:1", "op:}", "op:}", "}}"}));
}

TEST(JinjaLexer, ErrorsCarryLineAndColumn) {
  JinjaError e = lex_error("ab\n  {{ 1 $ }}");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kSyntax);
  EXPECT_EQ(e.detail(), "unexpected char '$'");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 8);
  EXPECT_NE(std::string(e.what()).find("line 2, column 8"), std::string::npos);

  e = lex_error("{{ (1 ] }}");
  EXPECT_EQ(e.detail(), "unexpected ']', expected ')'");
  EXPECT_EQ(e.column(), 7);
  EXPECT_EQ(lex_error("x\n\n{# open").detail(), "Missing end of comment tag");
  EXPECT_EQ(lex_error("x\n\n{# open").line(), 3);
  EXPECT_EQ(lex_error("{% raw %} open").detail(), "Missing end of raw directive");
  EXPECT_EQ(lex_error("{{ 'open }}").detail(), "unexpected char '''");
  EXPECT_EQ(lex_error("{{ 99999999999999999999 }}").kind(), JinjaError::Kind::kSyntax);
  EXPECT_EQ(lex_error("{{ '\\xZ1' }}").detail(), "truncated \\xXX escape");
  EXPECT_EQ(lex_error("bad \xff byte").detail(), "the template is not valid UTF-8");
}

TEST(JinjaLexer, ColumnsCountCodePoints) {
  JinjaError e = lex_error("éé{{ $ }}");
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), 6);
}

}  // namespace
}  // namespace folio::jinja
