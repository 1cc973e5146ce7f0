// The syntax tree of a parsed Jinja template: expressions and statements as
// jinja2's parser builds them. A tree is immutable once parsed, so one parse
// can serve renders on many threads.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace folio::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;

enum class ExprKind : std::uint8_t {
  kConst,     // value
  kName,      // name
  kGetAttr,   // target.name
  kGetItem,   // target[args[0]]
  kSlice,     // args[0]:args[1]:args[2], each may be null; only as a GetItem key
  kCall,      // target(args, kwargs)
  kFilter,    // target|name(args, kwargs); a null target stands for a block's body
  kTest,      // target is name(args, kwargs)
  kNot,       // not args[0]
  kNeg,       // -args[0]
  kPos,       // +args[0]
  kBinary,    // args[0] name args[1], name one of + - * / // % ** ~
  kAnd,       // args[0] and args[1]
  kOr,        // args[0] or args[1]
  kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...
  kCondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
  kList,      // [args...]
  kTuple,     // (args...)
  kDict,      // {args[0]: args[1], args[2]: args[3], ...}
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  int column = 0;
  std::string name;
  Value value;
  ExprPtr target;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: == != < <= > >= in notin
};

// Where an assignment stores: a name, a tuple of targets, or ns.attr.
struct Target {
  enum class Kind : std::uint8_t { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  std::string name;
  std::string attr;
  std::vector<Target> items;
};

enum class StmtKind : std::uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // if expr: body, else else_body (elif is an If inside else_body)
  kFor,          // for target in expr [if cond]: body, else else_body
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter]: body
  kMacro,        // macro name(params = defaults): body
  kFilterBlock,  // filter filter: body
  kWith,         // with targets = values: body
  kBreak,
  kContinue,
  kScope,        // a block rendered in place (the generation tag)
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter;
  Target target;
  std::vector<Target> with_targets;
  std::vector<ExprPtr> with_values;
  std::vector<StmtPtr> body;
  std::vector<StmtPtr> else_body;
  // kMacro: parameter names; defaults align with the last params. A body that
  // uses `varargs` / `kwargs` takes extra positional / keyword arguments there.
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;
  bool catch_varargs = false;
  bool catch_kwargs = false;
};

}  // namespace folio::jinja
