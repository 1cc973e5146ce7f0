// Member access as jinja2's sandbox does it: x.name tries the attribute and
// then the item, x[key] the item and then the attribute. Attributes are the
// methods of str, list and dict (those that would mutate a container refuse
// to run, as in ImmutableSandboxedEnvironment) and a host object's own; there
// is nothing else to reach.
#pragma once

#include <string>

#include "jinja/value.h"

namespace folio::jinja {

Value get_attribute(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] with Python's index rules; an unset part is Undefined.
// Slicing what is not a str, list or tuple is an error.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace folio::jinja
