// Parser: tokens -> syntax tree, with jinja2's grammar and precedence
// (filters and tests bind tighter than arithmetic, ** is left-associative,
// `not` sits below comparisons). A template that does not parse is a syntax
// JinjaError carrying the line and column of the offending token.
#pragma once

#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace folio::jinja {

// Deepest nesting of blocks and sub-expressions a template may have.
inline constexpr int kMaxParseDepth = 200;

std::vector<StmtPtr> parse_template(std::string_view source, const LexerOptions& options = {});

}  // namespace folio::jinja
