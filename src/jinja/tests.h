// The tests a chat template can apply (`x is name(args)`), with jinja2's
// behaviour, Undefined included (it is iterable and a sequence, as in jinja2).
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace folio::jinja {

using TestFn = bool (*)(Interpreter& interp, const Value& subject, const CallArgs& args);

// The test of that name, or nullptr.
TestFn find_test(std::string_view name);

}  // namespace folio::jinja
