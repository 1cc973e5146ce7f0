// The globals a chat template can call, as Hugging Face's environment has
// them: jinja2's range (bounded as the sandbox bounds it), dict, namespace,
// joiner and cycler, plus raise_exception(message) and strftime_now(format).
#pragma once

#include <string>

#include "jinja/interpreter.h"
#include "jinja/value.h"

namespace folio::jinja {

// jinja2's sandbox refuses range() calls longer than this.
inline constexpr std::int64_t kMaxRange = 100000;

// A namespace(): the one object whose attributes `{% set ns.attr = v %}` may change.
class Namespace : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  Value attribute(const std::string& name) const override;
  void set_attribute(const std::string& name, Value value) { attrs_.set(Value::string(name), std::move(value)); }
  void release() override { attrs_.entries.clear(); }

 private:
  Mapping attrs_;
};

// Adds the global functions to `scope`.
void add_builtin_globals(Scope& scope);

}  // namespace folio::jinja
