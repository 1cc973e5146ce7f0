// Interpreter: renders a parsed template with jinja2's runtime semantics
// (scopes, loops, macros, undefined values) inside a sandbox: a template sees
// only the values it is given, and bounded steps, output size and call depth
// turn a runaway template into a limit JinjaError instead of a hang.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace folio::jinja {

struct JinjaLimits {
  std::int64_t max_steps = 1'000'000;        // expressions evaluated + statements run
  std::size_t max_output_bytes = 1u << 20;   // the output, and any one string or list built
  int max_call_depth = 64;                   // nested macro calls
};

// A frame of variables; lookups fall back to the parent frame.
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value);

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  // `now` is the clock strftime_now() reads.
  Interpreter(const JinjaLimits& limits, std::time_t now) : limits_(limits), now_(now) {}
  // Releases the objects it tracked, breaking the cycles a render can build.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with `globals` as the outermost scope.
  std::string render(const std::vector<StmtPtr>& body, const ScopePtr& globals);

  // For filters, tests, methods and functions.
  void step();                                  // one unit of work against max_steps
  void check_size(std::size_t size) const;      // a string or list about to be built
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& subject, const CallArgs& args);
  bool apply_test(const std::string& name, const Value& subject, const CallArgs& args);
  std::time_t now() const { return now_; }
  // An object that may end up in a reference cycle (macro, namespace).
  void track(std::shared_ptr<Object> obj) { tracked_.push_back(std::move(obj)); }

  // A macro's body run with its arguments bound; returns its output.
  Value call_macro(const Stmt& macro, const ScopePtr& closure, const CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_block(const std::vector<StmtPtr>& body, const ScopePtr& scope);
  Flow exec(const Stmt& stmt, const ScopePtr& scope);
  Flow exec_for(const Stmt& stmt, const ScopePtr& scope);
  // Runs body in its own scope, capturing its output.
  std::pair<std::string, Flow> capture(const std::vector<StmtPtr>& body, const ScopePtr& scope);
  void assign(const Target& target, const Value& value, const ScopePtr& scope);
  void emit(std::string_view text);

  Value eval(const Expr& expr, const ScopePtr& scope);
  Value eval_uncaught(const Expr& expr, const ScopePtr& scope);
  CallArgs eval_args(const Expr& expr, const ScopePtr& scope);
  bool eval_compare(const Expr& expr, const ScopePtr& scope);

  JinjaLimits limits_;
  std::time_t now_;
  std::int64_t steps_ = 0;
  int call_depth_ = 0;
  std::string* out_ = nullptr;
  const Value* block_value_ = nullptr;  // the subject of a {% filter %} / {% set x | f %} chain
  std::vector<std::shared_ptr<Object>> tracked_;
};

}  // namespace folio::jinja
