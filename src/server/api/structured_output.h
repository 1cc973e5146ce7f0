// The structured-output fields of a request, read into one ConstraintSpec:
// OpenAI's response_format (json_object, json_schema), vLLM's
// structured_outputs (json, regex, choice, grammar, json_object) and its
// older guided_* names, and llama-server's grammar (GBNF) and json_schema.
// At most one may constrain a request; every problem is a 400 naming it.
#pragma once

#include <optional>
#include <string>

#include "engine/constraint/constraint_compiler.h"
#include "server/api/json_fields.h"

namespace folio::server {

struct RequestedConstraint {
  std::string param;  // the field that gave it, for errors
  ConstraintSpec spec;
};

// A schema given as an object (its keys in the client's order, which the
// output follows), a boolean, or JSON text (vLLM takes both), as the text
// xgrammar compiles; 400 naming `param` otherwise.
std::string schema_text(const Json& schema, const std::string& param);

// A schema's properties come out in the order the client wrote them.
std::optional<RequestedConstraint> read_constraint(const Json& body);

}  // namespace folio::server
