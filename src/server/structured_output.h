// The structured-output fields of a request, read into one ConstraintSpec:
// OpenAI's response_format (json_object, json_schema), vLLM's
// structured_outputs (json, regex, choice, grammar, json_object) and its
// older guided_* names, and llama-server's grammar (GBNF) and json_schema.
// At most one may constrain a request; every problem is a 400 naming it.
#pragma once

#include <optional>
#include <string>

#include "engine/constraint/constraint_compiler.h"
#include "server/json_fields.h"

namespace folio::server {

struct RequestedConstraint {
  std::string param;  // the field that gave it, for errors
  ConstraintSpec spec;
};

// `ordered`: the body's ordered_fields, so that a schema's properties come
// out in the order the client wrote them.
std::optional<RequestedConstraint> read_constraint(const Json& body, const ResponseJson& ordered);

}  // namespace folio::server
