// Interpreter: statements and expressions evaluated with jinja2's scoping
// (a for-iteration, macro, with or captured block is a new frame; if is not).
#include "jinja/interpreter.h"

#include <algorithm>

#include "jinja/builtins.h"
#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/tests.h"

namespace folio::jinja {

namespace {

class Macro : public Object {
 public:
  Macro(const Stmt* stmt, ScopePtr closure) : stmt_(stmt), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + stmt_->name + "'>"; }
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) const override {
    if (!closure_) runtime_fail("macro '" + stmt_->name + "' was called after its render ended");
    return interp.call_macro(*stmt_, closure_, args);
  }
  // The closure's scope holds this macro: a cycle the render's end breaks.
  void release() override { closure_.reset(); }

 private:
  const Stmt* stmt_;  // owned by the template, which outlives the render
  ScopePtr closure_;
};

// What the iterations of one for loop share.
struct LoopState {
  std::vector<Value> items;
  bool has_last_changed = false;
  std::vector<Value> last_changed;
};

// `loop` inside a for: index, first, last, length, cycle(), changed(), ...
class Loop : public Object, public std::enable_shared_from_this<Loop> {
 public:
  Loop(std::shared_ptr<LoopState> state, std::size_t index) : state_(std::move(state)), index_(index) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index_ + 1) + "/" + std::to_string(length()) + ">";
  }
  Value attribute(const std::string& name) const override;
  Value cycle(const CallArgs& args) const {
    if (!args.keyword.empty()) runtime_fail("loop.cycle() takes no keyword arguments");
    if (args.positional.empty()) runtime_fail("no items for cycling given");
    return args.positional[index_ % args.positional.size()];
  }
  Value changed(const CallArgs& args) const {
    if (!state_->has_last_changed || state_->last_changed.size() != args.positional.size() ||
        !std::equal(args.positional.begin(), args.positional.end(), state_->last_changed.begin(), py_equal)) {
      state_->has_last_changed = true;
      state_->last_changed = args.positional;
      return Value::boolean(true);
    }
    return Value::boolean(false);
  }

 private:
  std::int64_t length() const { return static_cast<std::int64_t>(state_->items.size()); }

  std::shared_ptr<LoopState> state_;
  std::size_t index_;
};

class LoopMethod : public Object {
 public:
  LoopMethod(std::shared_ptr<const Loop> loop, std::string name) : loop_(std::move(loop)), name_(std::move(name)) {}
  std::string type_name() const override { return "method"; }
  bool callable() const override { return true; }
  Value call(Interpreter&, CallArgs& args) const override {
    return name_ == "cycle" ? loop_->cycle(args) : loop_->changed(args);
  }

 private:
  std::shared_ptr<const Loop> loop_;
  std::string name_;
};

Value Loop::attribute(const std::string& name) const {
  const auto i = static_cast<std::int64_t>(index_);
  const std::int64_t n = length();
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem") {
    return i > 0 ? state_->items[index_ - 1] : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? state_->items[index_ + 1] : Value::undefined("there is no next item");
  }
  if (name == "cycle" || name == "changed") {
    return Value::object(std::make_shared<LoopMethod>(shared_from_this(), name));
  }
  return Object::attribute(name);
}

// Restores a member on scope exit, exceptions included.
template <typename T>
class Restore {
 public:
  Restore(T& slot, T value) : slot_(slot), saved_(slot) { slot_ = value; }
  ~Restore() { slot_ = saved_; }
  Restore(const Restore&) = delete;
  Restore& operator=(const Restore&) = delete;

 private:
  T& slot_;
  T saved_;
};

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    for (const auto& [k, v] : s->vars_) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

Interpreter::~Interpreter() {
  for (const auto& obj : tracked_) obj->release();
}

std::string Interpreter::render(const std::vector<StmtPtr>& body, const ScopePtr& globals) {
  auto root = std::make_shared<Scope>(globals);
  std::string output;
  Restore<std::string*> redirect(out_, &output);
  exec_block(body, root);
  return output;
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps) {
    throw JinjaError(JinjaError::Kind::kLimit,
                     "the template ran more than " + std::to_string(limits_.max_steps) +
                         " steps (a loop that does not end, or an input too long for it); raise "
                         "JinjaLimits::max_steps if the input is that large");
  }
}

void Interpreter::check_size(std::size_t size) const {
  if (size > limits_.max_output_bytes) {
    throw JinjaError(JinjaError::Kind::kLimit,
                     "the template built a value of " + std::to_string(size) +
                         " bytes or items, over the limit of " + std::to_string(limits_.max_output_bytes) +
                         "; raise JinjaLimits::max_output_bytes if this input needs it");
  }
}

void Interpreter::emit(std::string_view text) {
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    throw JinjaError(JinjaError::Kind::kLimit,
                     "the rendered text passed the limit of " + std::to_string(limits_.max_output_bytes) +
                         " bytes; raise JinjaLimits::max_output_bytes if this input needs it");
  }
  out_->append(text);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_object() || !callee.obj().callable()) {
    runtime_fail("'" + callee.type_name() + "' object is not callable");
  }
  return callee.obj().call(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& subject, const CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (!fn) runtime_fail("No filter named '" + name + "'.");
  return fn(*this, subject, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& subject, const CallArgs& args) {
  TestFn fn = find_test(name);
  if (!fn) runtime_fail("No test named '" + name + "'.");
  return fn(*this, subject, args);
}

Value Interpreter::call_macro(const Stmt& macro, const ScopePtr& closure, const CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth) {
    throw JinjaError(JinjaError::Kind::kLimit,
                     "macros call each other more than " + std::to_string(limits_.max_call_depth) +
                         " deep (a recursion without end?); raise JinjaLimits::max_call_depth if it is meant");
  }
  Restore<int> depth(call_depth_, call_depth_ + 1);
  const auto& params = macro.params;
  if (args.positional.size() > params.size() && !macro.catch_varargs) {
    runtime_fail("macro '" + macro.name + "' takes not more than " + std::to_string(params.size()) +
                 " argument(s)");
  }
  auto scope = std::make_shared<Scope>(closure);
  std::vector<bool> bound(params.size(), false);
  std::vector<Value> varargs;
  auto kwargs = std::make_shared<Mapping>();
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i >= params.size()) {
      varargs.push_back(args.positional[i]);
      continue;
    }
    scope->set(params[i], args.positional[i]);
    bound[i] = true;
  }
  for (const auto& [name, value] : args.keyword) {
    std::size_t i = 0;
    while (i < params.size() && params[i] != name) ++i;
    if (i == params.size()) {
      if (!macro.catch_kwargs) runtime_fail("macro '" + macro.name + "' takes no keyword argument '" + name + "'");
      kwargs->set(Value::string(name), value);
      continue;
    }
    if (bound[i]) runtime_fail("macro '" + macro.name + "' got multiple values for argument '" + name + "'");
    scope->set(params[i], value);
    bound[i] = true;
  }
  if (macro.catch_varargs) scope->set("varargs", Value::sequence(std::move(varargs), SeqKind::kTuple));
  if (macro.catch_kwargs) scope->set("kwargs", Value::mapping(std::move(kwargs)));
  const std::size_t first_default = params.size() - macro.defaults.size();
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (bound[i]) continue;
    scope->set(params[i], i >= first_default ? eval(*macro.defaults[i - first_default], scope)
                                             : Value::undefined("parameter '" + params[i] + "' was not provided"));
  }
  return Value::string(capture(macro.body, scope).first);
}

Interpreter::Flow Interpreter::exec_block(const std::vector<StmtPtr>& body, const ScopePtr& scope) {
  for (const StmtPtr& stmt : body) {
    Flow flow = exec(*stmt, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

std::pair<std::string, Interpreter::Flow> Interpreter::capture(const std::vector<StmtPtr>& body,
                                                               const ScopePtr& scope) {
  std::string buffer;
  Restore<std::string*> redirect(out_, &buffer);
  Flow flow = exec_block(body, scope);
  return {std::move(buffer), flow};
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const ScopePtr& scope) {
  step();
  try {
    switch (stmt.kind) {
      case StmtKind::kText: emit(stmt.text); break;
      case StmtKind::kOutput: emit(eval(*stmt.expr, scope).str()); break;
      case StmtKind::kIf:
        return exec_block(eval(*stmt.expr, scope).truthy() ? stmt.body : stmt.else_body, scope);
      case StmtKind::kFor: return exec_for(stmt, scope);
      case StmtKind::kSet: assign(stmt.target, eval(*stmt.expr, scope), scope); break;
      case StmtKind::kSetBlock:
      case StmtKind::kFilterBlock: {
        auto [text, flow] = capture(stmt.body, std::make_shared<Scope>(scope));
        if (flow != Flow::kNormal) return flow;
        Value value = Value::string(std::move(text));
        if (stmt.filter) {
          Restore<const Value*> subject(block_value_, &value);
          value = eval(*stmt.filter, scope);
        }
        if (stmt.kind == StmtKind::kSetBlock) {
          assign(stmt.target, value, scope);
        } else {
          emit(value.str());
        }
        break;
      }
      case StmtKind::kMacro: {
        auto macro = std::make_shared<Macro>(&stmt, scope);
        track(macro);
        scope->set(stmt.name, Value::object(std::move(macro)));
        break;
      }
      case StmtKind::kWith: {
        auto inner = std::make_shared<Scope>(scope);
        for (std::size_t i = 0; i < stmt.with_targets.size(); ++i) {
          assign(stmt.with_targets[i], eval(*stmt.with_values[i], scope), inner);
        }
        return exec_block(stmt.body, inner);
      }
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
      case StmtKind::kScope: return exec_block(stmt.body, std::make_shared<Scope>(scope));
    }
  } catch (const JinjaError& e) {
    if (e.line() == 0) throw e.at(stmt.line, stmt.column);
    throw;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& stmt, const ScopePtr& scope) {
  auto state = std::make_shared<LoopState>();
  state->items = py_iterate(eval(*stmt.expr, scope));
  if (stmt.cond) {
    std::vector<Value> kept;
    for (Value& item : state->items) {
      step();
      auto filter_scope = std::make_shared<Scope>(scope);
      assign(stmt.target, item, filter_scope);
      if (eval(*stmt.cond, filter_scope).truthy()) kept.push_back(std::move(item));
    }
    state->items = std::move(kept);
  }
  if (state->items.empty()) return exec_block(stmt.else_body, scope);
  for (std::size_t i = 0; i < state->items.size(); ++i) {
    step();
    auto iteration = std::make_shared<Scope>(scope);
    iteration->set("loop", Value::object(std::make_shared<Loop>(state, i)));
    assign(stmt.target, state->items[i], iteration);
    if (exec_block(stmt.body, iteration) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::assign(const Target& target, const Value& value, const ScopePtr& scope) {
  switch (target.kind) {
    case Target::Kind::kName: scope->set(target.name, value); return;
    case Target::Kind::kTuple: {
      std::vector<Value> items = py_iterate(value);
      const std::size_t want = target.items.size();
      if (items.size() < want) {
        runtime_fail("not enough values to unpack (expected " + std::to_string(want) + ", got " +
                     std::to_string(items.size()) + ")");
      }
      if (items.size() > want) runtime_fail("too many values to unpack (expected " + std::to_string(want) + ")");
      for (std::size_t i = 0; i < want; ++i) assign(target.items[i], items[i], scope);
      return;
    }
    case Target::Kind::kNamespaceAttr: {
      const Value* holder = scope->find(target.name);
      auto* ns = holder && holder->is_object() ? dynamic_cast<Namespace*>(&holder->obj()) : nullptr;
      if (!ns) runtime_fail("cannot assign attribute on non-namespace object");
      ns->set_attribute(target.attr, value);
      return;
    }
  }
}

Value Interpreter::eval(const Expr& expr, const ScopePtr& scope) {
  step();
  try {
    return eval_uncaught(expr, scope);
  } catch (const JinjaError& e) {
    if (e.line() == 0) throw e.at(expr.line, expr.column);
    throw;
  }
}

CallArgs Interpreter::eval_args(const Expr& expr, const ScopePtr& scope) {
  CallArgs args;
  args.positional.reserve(expr.args.size());
  for (const ExprPtr& arg : expr.args) args.positional.push_back(eval(*arg, scope));
  for (const auto& [name, arg] : expr.kwargs) args.keyword.emplace_back(name, eval(*arg, scope));
  return args;
}

bool Interpreter::eval_compare(const Expr& expr, const ScopePtr& scope) {
  Value left = eval(*expr.args[0], scope);
  for (std::size_t i = 0; i < expr.ops.size(); ++i) {
    Value right = eval(*expr.args[i + 1], scope);
    const std::string& op = expr.ops[i];
    bool ok;
    if (op == "==") {
      ok = py_equal(left, right);
    } else if (op == "!=") {
      ok = !py_equal(left, right);
    } else if (op == "in") {
      ok = py_contains(right, left);
    } else if (op == "notin") {
      ok = !py_contains(right, left);
    } else {
      ok = py_compare(left, right, op);
    }
    if (!ok) return false;
    left = std::move(right);
  }
  return true;
}

Value Interpreter::eval_uncaught(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::kConst: return expr.value;
    case ExprKind::kName: {
      const Value* found = scope->find(expr.name);
      return found ? *found : Value::undefined("'" + expr.name + "' is undefined");
    }
    case ExprKind::kGetAttr: return get_attribute(eval(*expr.target, scope), expr.name);
    case ExprKind::kGetItem: {
      Value obj = eval(*expr.target, scope);
      const Expr& key = *expr.args[0];
      if (key.kind != ExprKind::kSlice) return get_item(obj, eval(key, scope));
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (key.args[i]) parts[i] = eval(*key.args[i], scope);
      }
      return get_slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::kSlice: runtime_fail("a slice can only appear inside [ ]");
    case ExprKind::kCall: {
      Value callee = eval(*expr.target, scope);
      CallArgs args = eval_args(expr, scope);
      return call(callee, args);
    }
    case ExprKind::kFilter: {
      Value subject = expr.target ? eval(*expr.target, scope) : *block_value_;
      return apply_filter(expr.name, subject, eval_args(expr, scope));
    }
    case ExprKind::kTest: {
      Value subject = eval(*expr.target, scope);
      return Value::boolean(apply_test(expr.name, subject, eval_args(expr, scope)));
    }
    case ExprKind::kNot: return Value::boolean(!eval(*expr.args[0], scope).truthy());
    case ExprKind::kNeg: return py_unary(eval(*expr.args[0], scope), true);
    case ExprKind::kPos: return py_unary(eval(*expr.args[0], scope), false);
    case ExprKind::kBinary: {
      Value left = eval(*expr.args[0], scope);
      Value right = eval(*expr.args[1], scope);
      return py_binary(expr.name, left, right, limits_.max_output_bytes);
    }
    case ExprKind::kAnd: {
      Value left = eval(*expr.args[0], scope);
      return left.truthy() ? eval(*expr.args[1], scope) : left;
    }
    case ExprKind::kOr: {
      Value left = eval(*expr.args[0], scope);
      return left.truthy() ? left : eval(*expr.args[1], scope);
    }
    case ExprKind::kCompare: return Value::boolean(eval_compare(expr, scope));
    case ExprKind::kCondExpr:
      if (eval(*expr.args[0], scope).truthy()) return eval(*expr.args[1], scope);
      if (expr.args[2]) return eval(*expr.args[2], scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    case ExprKind::kList:
    case ExprKind::kTuple: {
      check_size(expr.args.size());
      std::vector<Value> items;
      items.reserve(expr.args.size());
      for (const ExprPtr& e : expr.args) items.push_back(eval(*e, scope));
      return Value::sequence(std::move(items), expr.kind == ExprKind::kList ? SeqKind::kList : SeqKind::kTuple);
    }
    case ExprKind::kDict: {
      auto map = std::make_shared<Mapping>();
      for (std::size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        Value key = eval(*expr.args[i], scope);
        map->set(std::move(key), eval(*expr.args[i + 1], scope));
      }
      return Value::mapping(std::move(map));
    }
  }
  runtime_fail("internal error: unknown expression kind");
}

}  // namespace folio::jinja
