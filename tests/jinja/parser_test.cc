// The parser: jinja2's precedence and statement shapes, and syntax errors
// that name the problem with its line and column.
#include <gtest/gtest.h>

#include <string>

#include "jinja/error.h"
#include "jinja/parser.h"

namespace folio::jinja {
namespace {

// A compact s-expression of an expression tree.
std::string show(const Expr* e) {
  if (!e) return "_";
  auto list = [](const std::vector<ExprPtr>& items) {
    std::string out;
    for (const auto& item : items) out += " " + show(item.get());
    return out;
  };
  switch (e->kind) {
    case ExprKind::kConst: return e->value.repr();
    case ExprKind::kName: return e->name;
    case ExprKind::kGetAttr: return "(. " + show(e->target.get()) + " " + e->name + ")";
    case ExprKind::kGetItem: return "([] " + show(e->target.get()) + list(e->args) + ")";
    case ExprKind::kSlice: return "(:" + list(e->args) + ")";
    case ExprKind::kCall: return "(call " + show(e->target.get()) + list(e->args) + ")";
    case ExprKind::kFilter: return "(|" + e->name + " " + show(e->target.get()) + list(e->args) + ")";
    case ExprKind::kTest: return "(is " + e->name + " " + show(e->target.get()) + list(e->args) + ")";
    case ExprKind::kNot: return "(not" + list(e->args) + ")";
    case ExprKind::kNeg: return "(neg" + list(e->args) + ")";
    case ExprKind::kPos: return "(pos" + list(e->args) + ")";
    case ExprKind::kBinary: return "(" + e->name + list(e->args) + ")";
    case ExprKind::kAnd: return "(and" + list(e->args) + ")";
    case ExprKind::kOr: return "(or" + list(e->args) + ")";
    case ExprKind::kCompare: {
      std::string out = "(cmp " + show(e->args[0].get());
      for (std::size_t i = 0; i < e->ops.size(); ++i) out += " " + e->ops[i] + " " + show(e->args[i + 1].get());
      return out + ")";
    }
    case ExprKind::kCondExpr: return "(if" + list(e->args) + ")";
    case ExprKind::kList: return "[" + list(e->args) + " ]";
    case ExprKind::kTuple: return "(tuple" + list(e->args) + ")";
    case ExprKind::kDict: return "{" + list(e->args) + " }";
  }
  return "?";
}

std::string expr(const std::string& source) {
  std::vector<StmtPtr> body = parse_template("{{ " + source + " }}");
  EXPECT_EQ(body.size(), 1u);
  return show(body[0]->expr.get());
}

JinjaError parse_error(const std::string& source) {
  try {
    parse_template(source);
  } catch (const JinjaError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << source;
  return JinjaError(JinjaError::Kind::kSyntax, "none");
}

TEST(JinjaParser, PrecedenceFollowsJinja2) {
  EXPECT_EQ(expr("-2 ** 2"), "(** (neg 2) 2)");            // unary minus binds first
  EXPECT_EQ(expr("2 ** 3 ** 2"), "(** (** 2 3) 2)");        // and ** is left-associative
  EXPECT_EQ(expr("a + b | upper"), "(+ a (|upper b))");     // filters bind to the operand
  EXPECT_EQ(expr("-x | abs"), "(|abs (neg x))");
  EXPECT_EQ(expr("a ~ b * c + d"), "(+ (~ a (* b c)) d)");  // ~ between + and *
  EXPECT_EQ(expr("not a is defined"), "(not (is defined a))");
  EXPECT_EQ(expr("a is not none and b"), "(and (not (is none a)) b)");
  EXPECT_EQ(expr("not a == b or c"), "(or (not (cmp a == b)) c)");
  EXPECT_EQ(expr("1 < x <= 3"), "(cmp 1 < x <= 3)");
  EXPECT_EQ(expr("a not in b"), "(cmp a notin b)");
  EXPECT_EQ(expr("x is divisibleby 3"), "(is divisibleby x 3)");
  EXPECT_EQ(expr("a if b else c if d else e"), "(if b a (if d c e))");
  EXPECT_EQ(expr("a if b"), "(if b a _)");
}

TEST(JinjaParser, PostfixAndLiterals) {
  EXPECT_EQ(expr("m.role"), "(. m role)");
  EXPECT_EQ(expr("l.0"), "([] l 0)");
  EXPECT_EQ(expr("m['content'][0]"), "([] ([] m 'content') 0)");
  EXPECT_EQ(expr("l[1:]"), "([] l (: 1 _ _))");
  EXPECT_EQ(expr("l[::-1]"), "([] l (: _ _ (neg 1)))");
  EXPECT_EQ(expr("s.split(',')[-1]"), "([] (call (. s split) ',') (neg 1))");
  EXPECT_EQ(expr("x|join(', ')|trim"), "(|trim (|join x ', '))");
  EXPECT_EQ(expr("'a' 'b'"), "'ab'");
  EXPECT_EQ(expr("(1,)"), "(tuple 1)");
  EXPECT_EQ(expr("()"), "(tuple)");
  EXPECT_EQ(expr("[1, 'x',]"), "[ 1 'x' ]");
  EXPECT_EQ(expr("{'k': none, 'b': True}"), "{ 'k' None 'b' True }");
  EXPECT_EQ(expr("a, b"), "(tuple a b)");
  EXPECT_EQ(expr("TRUE"), "TRUE");  // only true/True/false/False/none/None are constants
}

TEST(JinjaParser, StatementShapes) {
  auto body = parse_template("{% for k, v in d|items if v %}{{ k }}{% else %}-{% endfor %}");
  ASSERT_EQ(body.size(), 1u);
  const Stmt& loop = *body[0];
  EXPECT_EQ(loop.kind, StmtKind::kFor);
  EXPECT_EQ(loop.target.kind, Target::Kind::kTuple);
  EXPECT_EQ(loop.target.items.size(), 2u);
  EXPECT_EQ(show(loop.expr.get()), "(|items d)");
  EXPECT_EQ(show(loop.cond.get()), "v");
  EXPECT_EQ(loop.body.size(), 1u);
  EXPECT_EQ(loop.else_body.size(), 1u);

  body = parse_template("{% if a %}1{% elif b %}2{% else %}3{% endif %}");
  ASSERT_EQ(body[0]->else_body.size(), 1u);
  const Stmt& elif = *body[0]->else_body[0];
  EXPECT_EQ(elif.kind, StmtKind::kIf);
  EXPECT_EQ(show(elif.expr.get()), "b");
  EXPECT_EQ(elif.else_body.size(), 1u);

  body = parse_template("{% set ns.count = ns.count + 1 %}");
  EXPECT_EQ(body[0]->target.kind, Target::Kind::kNamespaceAttr);
  EXPECT_EQ(body[0]->target.name, "ns");
  EXPECT_EQ(body[0]->target.attr, "count");

  body = parse_template("{% macro m(a, b=1) %}{{ varargs }}{% endmacro %}");
  EXPECT_EQ(body[0]->params, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(body[0]->defaults.size(), 1u);
  EXPECT_TRUE(body[0]->catch_varargs);
  EXPECT_FALSE(body[0]->catch_kwargs);
}

TEST(JinjaParser, UnclosedBlockSaysWhatItWaitsFor) {
  JinjaError e = parse_error("{% for x in y %}\n{% if x %}\nbody");
  EXPECT_EQ(e.kind(), JinjaError::Kind::kSyntax);
  EXPECT_EQ(e.detail(),
            "Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. "
            "The innermost block that needs to be closed is 'if'.");
  EXPECT_EQ(e.line(), 3);
}

TEST(JinjaParser, ErrorsNameTheProblemAndItsPlace) {
  JinjaError e = parse_error("line\n{% if x %}{% endfor %}{% endif %}");
  EXPECT_EQ(e.detail(),
            "Encountered unknown tag 'endfor'. Jinja was looking for the following tags: 'elif' or 'else' or "
            "'endif'. The innermost block that needs to be closed is 'if'.");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 14);

  e = parse_error("{{ 1 + }}");
  EXPECT_EQ(e.detail(), "unexpected 'end of print statement'");
  EXPECT_EQ(e.column(), 8);
  EXPECT_EQ(parse_error("{% frobnicate %}").detail(), "Encountered unknown tag 'frobnicate'.");
  EXPECT_EQ(parse_error("{% macro m(a=1, b) %}{% endmacro %}").detail(),
            "non-default argument follows default argument");
  EXPECT_EQ(parse_error("{% set 1 = 2 %}").detail(), "can't assign to 'const'");
  EXPECT_EQ(parse_error("{{ x is string is number }}").detail(), "You cannot chain multiple tests with is");
  EXPECT_EQ(parse_error("{% break %}").detail(), "'break' outside of a loop");
  EXPECT_NE(parse_error("{% include 'x' %}").detail().find("not supported"), std::string::npos);
}

TEST(JinjaParser, UnknownFiltersFailAtParseTimeExceptInsideIf) {
  JinjaError e = parse_error("ok\n  {{ x|frobnicate }}");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 8);
  EXPECT_NE(e.detail().find("No filter named 'frobnicate'"), std::string::npos);
  EXPECT_NE(parse_error("{{ x is frobnicated }}").detail().find("No test named 'frobnicated'"), std::string::npos);
  // jinja2 defers these to run time: the branch may never run.
  EXPECT_NO_THROW(parse_template("{% if false %}{{ x|frobnicate }}{% endif %}"));
  EXPECT_NO_THROW(parse_template("{{ x|frobnicate if false else 1 }}"));
  // ... but a loop inside an if is strict again, as in jinja2.
  EXPECT_THROW(parse_template("{% if false %}{% for i in x %}{{ i|frobnicate }}{% endfor %}{% endif %}"), JinjaError);
}

TEST(JinjaParser, HostileNestingIsAnErrorNotACrash) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(parse_error(deep).detail().find("nests"), std::string::npos);
  std::string blocks;
  for (int i = 0; i < 1000; ++i) blocks += "{% if true %}";
  EXPECT_NE(parse_error(blocks).detail().find("nests"), std::string::npos);
}

}  // namespace
}  // namespace folio::jinja
