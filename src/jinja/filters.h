// The filters a chat template can apply (`x|name(args)`), with jinja2's
// behaviour and Hugging Face's tojson (json.dumps keeping non-ASCII text).
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace folio::jinja {

using FilterFn = Value (*)(Interpreter& interp, const Value& subject, const CallArgs& args);

// The filter of that name, or nullptr.
FilterFn find_filter(std::string_view name);

}  // namespace folio::jinja
