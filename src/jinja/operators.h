// Python's operators on Values as jinja2 evaluates them: arithmetic with int
// and float promotion and floor semantics, str/list concatenation and
// repetition (with Markup escaping), ~, `in`, len() and iter().
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace folio::jinja {

// a op b for op in + - * / // % ** ~; results longer than max_size fail.
Value py_binary(std::string_view op, const Value& a, const Value& b, std::size_t max_size);
// format % args for a str format: %s %r %d %i %f %% with flags (- 0 + space),
// width and precision, and %(name)s with a dict. args is a tuple, a dict or one value.
std::string py_percent_format(const std::string& format, const Value& args, std::size_t max_size);
// -v (negate) or +v.
Value py_unary(const Value& v, bool negate);
// `item in container`.
bool py_contains(const Value& container, const Value& item);
// len(v): Undefined is 0, str counts code points; generators have none.
std::int64_t py_len(const Value& v);
// iter(v) drained: list items, dict keys, str characters; Undefined is
// empty; a generator yields its items once.
std::vector<Value> py_iterate(const Value& v);
// int(v) for an index or count argument; `what` names it in errors.
std::int64_t py_index(const Value& v, std::string_view what);

}  // namespace folio::jinja
