// Parser: a recursive-descent parser with jinja2's grammar, statement set
// (plus loopcontrols' break/continue and HF's generation tag) and messages.
#include "jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>

#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/tests.h"

namespace folio::jinja {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::vector<StmtPtr> parse() {
    std::vector<StmtPtr> body = subparse({});
    check_names(body, false);
    return body;
  }

 private:
  // --- token stream -------------------------------------------------------

  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(std::size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  const Token& advance() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op) const { return is_op(cur(), op); }
  static bool is_op(const Token& t, std::string_view op) {
    return t.kind == TokenKind::kOperator && t.text == op;
  }
  bool is_name(std::string_view name) const { return is_name(cur(), name); }
  static bool is_name(const Token& t, std::string_view name) {
    return t.kind == TokenKind::kName && t.text == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kName:
      case TokenKind::kOperator:
      case TokenKind::kInteger:
      case TokenKind::kFloat: return t.text;
      case TokenKind::kString: return "string";
      default: return token_kind_name(t.kind);
    }
  }

  [[noreturn]] void fail(const std::string& message) const { fail_at(cur(), message); }
  [[noreturn]] static void fail_at(const Token& t, const std::string& message) {
    throw JinjaError(JinjaError::Kind::kSyntax, message, t.line, t.column);
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected token '" + std::string(op) + "', got '" + describe(cur()) + "'");
  }
  void expect(TokenKind kind) {
    if (cur().kind != kind) {
      fail(std::string("expected token '") + token_kind_name(kind) + "', got '" + describe(cur()) + "'");
    }
    advance();
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::kName) fail("expected token 'name', got '" + describe(cur()) + "'");
    return advance().text;
  }

  // Guards recursion so that hostile nesting is an error, not a stack overflow.
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxParseDepth) {
        parser.fail("the template nests blocks or expressions more than " +
                    std::to_string(kMaxParseDepth) + " deep");
      }
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  ExprPtr make(ExprKind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }
  StmtPtr make_stmt(StmtKind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->column = at.column;
    return s;
  }

  // --- statements ---------------------------------------------------------

  using EndTags = std::vector<std::string_view>;

  std::vector<StmtPtr> subparse(const EndTags& end_tags) {
    DepthGuard guard(*this);
    std::vector<StmtPtr> body;
    if (!end_tags.empty()) end_stack_.push_back(end_tags);
    while (cur().kind != TokenKind::kEnd) {
      const Token& t = cur();
      if (t.kind == TokenKind::kText) {
        auto s = make_stmt(StmtKind::kText, t);
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.kind == TokenKind::kVariableBegin) {
        advance();
        auto s = make_stmt(StmtKind::kOutput, t);
        s->expr = parse_tuple(false, true, {}, false);
        expect(TokenKind::kVariableEnd);
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kBlockBegin) {
        advance();
        if (cur().kind == TokenKind::kName &&
            std::find(end_tags.begin(), end_tags.end(), cur().text) != end_tags.end()) {
          end_stack_.pop_back();
          return body;
        }
        parse_statement(body);
        expect(TokenKind::kBlockEnd);
      } else {
        fail("internal parser error: unexpected " + describe(t));
      }
    }
    if (!end_tags.empty()) end_stack_.pop_back();
    return body;
  }

  // The body of a block up to one of end_tags; `drop_needle` consumes the end tag's name.
  std::vector<StmtPtr> parse_statements(const EndTags& end_tags, bool drop_needle) {
    skip_op(":");
    expect(TokenKind::kBlockEnd);
    std::vector<StmtPtr> body = subparse(end_tags);
    if (cur().kind == TokenKind::kEnd) fail_unknown_tag(nullptr, end_tags);
    if (drop_needle) advance();
    return body;
  }

  [[noreturn]] void fail_unknown_tag(const std::string* name, const EndTags& innermost) {
    std::string message = name ? "Encountered unknown tag '" + *name + "'." : "Unexpected end of template.";
    EndTags looking = innermost.empty() && !end_stack_.empty() ? end_stack_.back() : innermost;
    if (!looking.empty()) {
      std::string list;
      for (std::size_t i = 0; i < looking.size(); ++i) {
        if (i) list += " or ";
        list += "'" + std::string(looking[i]) + "'";
      }
      message += " Jinja was looking for the following tags: " + list + ".";
    }
    if (!tag_stack_.empty()) {
      message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    }
    fail(message);
  }

  void parse_statement(std::vector<StmtPtr>& out) {
    const Token& t = cur();
    if (t.kind != TokenKind::kName) fail("tag name expected");
    const std::string tag = t.text;
    static const EndTags kUnsupported = {"block", "extends", "include", "import", "from", "call", "autoescape"};
    if (std::find(kUnsupported.begin(), kUnsupported.end(), tag) != kUnsupported.end()) {
      fail("the '" + tag + "' tag is not supported in chat templates (they cannot load other "
           "templates); rewrite the template without it");
    }
    tag_stack_.push_back(tag);
    if (tag == "for") {
      out.push_back(parse_for());
    } else if (tag == "if") {
      out.push_back(parse_if());
    } else if (tag == "set") {
      out.push_back(parse_set());
    } else if (tag == "macro") {
      out.push_back(parse_macro());
    } else if (tag == "filter") {
      out.push_back(parse_filter_block());
    } else if (tag == "with") {
      out.push_back(parse_with());
    } else if (tag == "print") {
      parse_print(out);
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop");
      out.push_back(make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, advance()));
    } else if (tag == "generation") {
      auto s = make_stmt(StmtKind::kScope, advance());
      s->body = parse_statements({"endgeneration"}, true);
      out.push_back(std::move(s));
    } else {
      tag_stack_.pop_back();
      fail_unknown_tag(&tag, {});
    }
    tag_stack_.pop_back();
  }

  StmtPtr parse_for() {
    auto s = make_stmt(StmtKind::kFor, advance());
    s->target = parse_assign_target(true, false, {"in"}, false);
    if (!skip_name("in")) fail("expected token 'in', got '" + describe(cur()) + "'");
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail("recursive loops are not supported in chat templates");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (advance().text == "else") s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_if() {
    auto s = make_stmt(StmtKind::kIf, advance());
    s->expr = parse_tuple(false, false, {}, false);
    s->body = parse_statements({"elif", "else", "endif"}, false);
    parse_if_tail(*s);
    return s;
  }

  // After an if's (or elif's) body: an elif becomes an If nested in the
  // else branch, sharing the one endif.
  void parse_if_tail(Stmt& node) {
    const Token& t = advance();
    if (t.text == "elif") {
      auto nested = make_stmt(StmtKind::kIf, t);
      nested->expr = parse_tuple(false, false, {}, false);
      nested->body = parse_statements({"elif", "else", "endif"}, false);
      parse_if_tail(*nested);
      node.else_body.push_back(std::move(nested));
    } else if (t.text == "else") {
      node.else_body = parse_statements({"endif"}, true);
    }
  }

  StmtPtr parse_set() {
    const Token& at = advance();
    Target target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      auto s = make_stmt(StmtKind::kSet, at);
      s->target = std::move(target);
      s->expr = parse_tuple(false, true, {}, false);
      return s;
    }
    auto s = make_stmt(StmtKind::kSetBlock, at);
    s->target = std::move(target);
    if (is_op("|")) s->filter = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  StmtPtr parse_macro() {
    auto s = make_stmt(StmtKind::kMacro, advance());
    s->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      s->params.push_back(expect_name());
      if (skip_op("=")) {
        s->defaults.push_back(parse_expression(true));
      } else if (!s->defaults.empty()) {
        fail("non-default argument follows default argument");
      }
    }
    expect_op(")");
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved_loop_depth;
    s->catch_varargs = uses_name(s->body, "varargs");
    s->catch_kwargs = uses_name(s->body, "kwargs");
    return s;
  }

  static bool uses_name(const Expr& e, std::string_view name) {
    if (e.kind == ExprKind::kName && e.name == name) return true;
    if (e.target && uses_name(*e.target, name)) return true;
    for (const ExprPtr& arg : e.args) {
      if (arg && uses_name(*arg, name)) return true;
    }
    for (const auto& [key, arg] : e.kwargs) {
      if (uses_name(*arg, name)) return true;
    }
    return false;
  }

  static bool uses_name(const std::vector<StmtPtr>& body, std::string_view name) {
    for (const StmtPtr& s : body) {
      for (const Expr* e : {s->expr.get(), s->cond.get(), s->filter.get()}) {
        if (e && uses_name(*e, name)) return true;
      }
      for (const ExprPtr& e : s->with_values) {
        if (uses_name(*e, name)) return true;
      }
      for (const ExprPtr& e : s->defaults) {
        if (uses_name(*e, name)) return true;
      }
      if (uses_name(s->body, name) || uses_name(s->else_body, name)) return true;
    }
    return false;
  }

  StmtPtr parse_filter_block() {
    auto s = make_stmt(StmtKind::kFilterBlock, advance());
    s->filter = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    auto s = make_stmt(StmtKind::kWith, advance());
    while (cur().kind != TokenKind::kBlockEnd) {
      if (!s->with_targets.empty()) expect_op(",");
      s->with_targets.push_back(parse_assign_target(true, false, {}, false));
      expect_op("=");
      s->with_values.push_back(parse_expression(true));
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  void parse_print(std::vector<StmtPtr>& out) {
    advance();
    bool first = true;
    while (cur().kind != TokenKind::kBlockEnd) {
      if (!first) expect_op(",");
      first = false;
      auto s = make_stmt(StmtKind::kOutput, cur());
      s->expr = parse_expression(true);
      out.push_back(std::move(s));
    }
  }

  Target parse_assign_target(bool with_tuple, bool name_only, const EndTags& extra_end, bool with_namespace) {
    if (with_namespace && cur().kind == TokenKind::kName && is_op(peek(), ".")) {
      Target t;
      t.kind = Target::Kind::kNamespaceAttr;
      t.name = advance().text;
      advance();
      t.attr = expect_name();
      return t;
    }
    if (name_only) {
      Target t;
      t.name = expect_name();
      return t;
    }
    const Token& at = cur();
    ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    return to_target(*e, at);
  }

  Target to_target(const Expr& e, const Token& at) {
    Target t;
    if (e.kind == ExprKind::kName) {
      t.name = e.name;
      return t;
    }
    if (e.kind == ExprKind::kTuple) {
      t.kind = Target::Kind::kTuple;
      for (const auto& item : e.args) t.items.push_back(to_target(*item, at));
      return t;
    }
    fail_at(at, "can't assign to '" + std::string(e.kind == ExprKind::kConst ? "const" : "expression") + "'");
  }

  // --- expressions --------------------------------------------------------

  bool is_tuple_end(const EndTags& extra_end) const {
    if (cur().kind == TokenKind::kVariableEnd || cur().kind == TokenKind::kBlockEnd || is_op(")")) return true;
    for (std::string_view name : extra_end) {
      if (is_name(name)) return true;
    }
    return false;
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const EndTags& extra_end, bool explicit_parens) {
    const Token& at = cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      if (simplified) {
        items.push_back(parse_primary());
      } else {
        items.push_back(parse_expression(with_condexpr));
      }
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto e = make(ExprKind::kTuple, at);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const Token& at = advance();
      auto e = make(ExprKind::kCondExpr, at);
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
      e->args.push_back(std::move(test));
      e->args.push_back(std::move(expr));
      e->args.push_back(std::move(otherwise));
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(ExprKind kind, const Token& at, ExprPtr left, ExprPtr right, std::string op = {}) {
    auto e = make(kind, at);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const Token& at = advance();
      left = binary(ExprKind::kOr, at, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const Token& at = advance();
      left = binary(ExprKind::kAnd, at, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(ExprKind::kNot, advance());
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr expr = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().kind == TokenKind::kOperator &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        op = advance().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && is_name(peek(), "in")) {
        advance();
        advance();
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(ExprKind::kCompare, at);
        cmp->args.push_back(std::move(expr));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(expr);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = advance();
      left = binary(ExprKind::kBinary, at, std::move(left), parse_concat(), at.text);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const Token& at = advance();
      left = binary(ExprKind::kBinary, at, std::move(left), parse_math2(), "~");
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = advance();
      left = binary(ExprKind::kBinary, at, std::move(left), parse_pow(), at.text);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& at = advance();
      left = binary(ExprKind::kBinary, at, std::move(left), parse_unary(true), "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& at = advance();
      node = make(at.text == "-" ? ExprKind::kNeg : ExprKind::kPos, at);
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& t = cur();
    if (t.kind == TokenKind::kName) {
      advance();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto e = make(ExprKind::kConst, t);
        e->value = Value::boolean(t.text == "true" || t.text == "True");
        return e;
      }
      if (t.text == "none" || t.text == "None") {
        auto e = make(ExprKind::kConst, t);
        e->value = Value::none();
        return e;
      }
      auto e = make(ExprKind::kName, t);
      e->name = t.text;
      return e;
    }
    if (t.kind == TokenKind::kString) {
      std::string text;
      while (cur().kind == TokenKind::kString) text += advance().text;  // adjacent literals join
      auto e = make(ExprKind::kConst, t);
      e->value = Value::string(std::move(text));
      return e;
    }
    if (t.kind == TokenKind::kInteger || t.kind == TokenKind::kFloat) {
      advance();
      auto e = make(ExprKind::kConst, t);
      e->value = t.kind == TokenKind::kInteger ? Value::integer(t.int_value) : Value::number(t.float_value);
      return e;
    }
    if (is_op("(")) {
      advance();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      auto e = make(ExprKind::kList, advance());
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      auto e = make(ExprKind::kDict, advance());
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail("unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = advance();
    if (t.text == ".") {
      const Token& attr = advance();
      if (attr.kind == TokenKind::kName) {
        auto e = make(ExprKind::kGetAttr, t);
        e->name = attr.text;
        e->target = std::move(node);
        return e;
      }
      if (attr.kind != TokenKind::kInteger) fail_at(attr, "expected name or number");
      auto e = make(ExprKind::kGetItem, t);
      auto key = make(ExprKind::kConst, attr);
      key->value = Value::integer(attr.int_value);
      e->target = std::move(node);
      e->args.push_back(std::move(key));
      return e;
    }
    // '['
    std::vector<ExprPtr> keys;
    while (!is_op("]")) {
      if (!keys.empty()) expect_op(",");
      keys.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = make(ExprKind::kGetItem, t);
    e->target = std::move(node);
    if (keys.size() == 1) {
      e->args.push_back(std::move(keys[0]));
    } else {
      auto tuple = make(ExprKind::kTuple, t);
      tuple->args = std::move(keys);
      e->args.push_back(std::move(tuple));
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    const Token& at = cur();
    std::vector<ExprPtr> parts;
    if (is_op(":")) {
      advance();
      parts.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!is_op(":")) return node;
      advance();
      parts.push_back(std::move(node));
    }
    if (is_op(":")) {
      parts.push_back(nullptr);
    } else if (!is_op("]") && !is_op(",")) {
      parts.push_back(parse_expression(true));
    } else {
      parts.push_back(nullptr);
    }
    if (is_op(":")) {
      advance();
      if (!is_op("]") && !is_op(",")) {
        parts.push_back(parse_expression(true));
      } else {
        parts.push_back(nullptr);
      }
    } else {
      parts.push_back(nullptr);
    }
    auto e = make(ExprKind::kSlice, at);
    e->args = std::move(parts);
    return e;
  }

  void parse_call_args(Expr& call) {
    const Token& open = cur();
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().kind == TokenKind::kName && is_op(peek(), "=")) {
        std::string key = advance().text;
        advance();
        call.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!call.kwargs.empty()) fail_at(open, "invalid syntax for function call expression");
        call.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::kCall, cur());
    e->target = std::move(node);
    parse_call_args(*e);
    return e;
  }

  // One or more `| name(args)` filters; `start_inline` when the first has no pipe.
  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) advance();
      start_inline = false;
      const Token& at = cur();
      auto e = make(ExprKind::kFilter, at);
      e->name = expect_name();
      while (is_op(".")) {
        advance();
        e->name += fmt::format(".{}", expect_name());
      }
      e->target = std::move(node);
      if (is_op("(")) parse_call_args(*e);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const Token& is_token = advance();
    bool negated = skip_name("not");
    auto e = make(ExprKind::kTest, is_token);
    e->name = expect_name();
    while (is_op(".")) {
      advance();
      e->name += fmt::format(".{}", expect_name());
    }
    e->target = std::move(node);
    const Token& t = cur();
    bool arg_start = t.kind == TokenKind::kName || t.kind == TokenKind::kString ||
                     t.kind == TokenKind::kInteger || t.kind == TokenKind::kFloat || is_op("(") ||
                     is_op("[") || is_op("{");
    if (is_op("(")) {
      parse_call_args(*e);
    } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = make(ExprKind::kNot, is_token);
    n->args.push_back(std::move(e));
    return n;
  }

  // --- names of filters and tests ------------------------------------------

  // jinja2 refuses an unknown filter or test when it compiles the template,
  // except inside an if (its test and branches) or an inline if, where the
  // error waits until the code runs; loops, macros and blocks in an if are
  // strict again. The same rule here, so that both refuse the same templates.
  static void check_names(const Expr& e, bool soft) {
    if (e.kind == ExprKind::kFilter || e.kind == ExprKind::kTest) {
      bool known = e.kind == ExprKind::kFilter ? find_filter(e.name) != nullptr : find_test(e.name) != nullptr;
      if (!known && !soft) {
        const char* what = e.kind == ExprKind::kFilter ? "filter" : "test";
        throw JinjaError(JinjaError::Kind::kSyntax,
                         std::string("No ") + what + " named '" + e.name +
                             "' (folio's chat templates have the filters and tests real templates use; "
                             "this one is missing or not supported)",
                         e.line, e.column);
      }
    }
    bool inner_soft = soft || e.kind == ExprKind::kCondExpr;
    if (e.target) check_names(*e.target, inner_soft);
    for (const ExprPtr& arg : e.args) {
      if (arg) check_names(*arg, inner_soft);
    }
    for (const auto& [name, arg] : e.kwargs) check_names(*arg, inner_soft);
  }

  static void check_names(const std::vector<StmtPtr>& body, bool soft) {
    for (const StmtPtr& stmt : body) check_names(*stmt, soft);
  }

  static void check_names(const Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::kIf:
        check_names(*s.expr, true);
        check_names(s.body, true);
        check_names(s.else_body, true);
        return;
      case StmtKind::kFor:
        check_names(*s.expr, soft);
        if (s.cond) check_names(*s.cond, false);
        check_names(s.body, false);
        check_names(s.else_body, false);
        return;
      case StmtKind::kWith:
        for (const ExprPtr& v : s.with_values) check_names(*v, soft);
        check_names(s.body, false);
        return;
      case StmtKind::kMacro:
        for (const ExprPtr& d : s.defaults) check_names(*d, false);
        check_names(s.body, false);
        return;
      default:
        if (s.expr) check_names(*s.expr, soft);
        if (s.filter) check_names(*s.filter, false);
        check_names(s.body, false);
        return;
    }
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<EndTags> end_stack_;
  std::vector<std::string> tag_stack_;
};

}  // namespace

std::vector<StmtPtr> parse_template(std::string_view source, const LexerOptions& options) {
  Parser parser(tokenize(source, options));
  return parser.parse();
}

}  // namespace folio::jinja
