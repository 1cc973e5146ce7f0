// Whether a JSON value fits a JSON schema: the check that tells a tool call a
// model wrote in a form its template does not ask for (a fenced JSON block)
// from text that only looks like one. It reads the keywords tool parameters
// use (type, enum, const, properties, required, additionalProperties, items,
// prefixItems, min/max and their exclusive forms, multipleOf, lengths, item
// and property counts, uniqueItems, anyOf/oneOf/allOf/not, local $ref) and,
// as JSON Schema does, ignores the ones it does not know. A keyword it knows
// but cannot check here (pattern, format) lets the value pass.
#pragma once

#include "server/api/json_fields.h"

namespace folio::server {

bool fits_schema(const Json& value, const Json& schema);

}  // namespace folio::server
