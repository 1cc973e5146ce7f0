#include "server/api/structured_output.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "server/api/api_error.h"

namespace folio::server {
namespace {

using Kind = ConstraintSpec::Kind;

// Most strings a choice may list.
constexpr std::size_t kMaxChoices = 1024;

using Found = RequestedConstraint;

}  // namespace

std::string schema_text(const Json& v, const std::string& param) {
  if (v.is_object()) return dump_json(v);
  if (v.is_boolean()) return v.get<bool>() ? "{}" : "false";
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const std::optional<Json> parsed = parse_json(s);
    if (!parsed || !(parsed->is_object() || parsed->is_boolean()))
      bad_request(param, fmt::format("{} must be a JSON schema: an object, or its JSON text", param));
    return s;
  }
  bad_request(param, fmt::format("{} must be a JSON schema (an object), got {}", param, describe(v)));
}

namespace {

std::string string_of(const Json& v, const std::string& param) {
  if (!v.is_string()) bad_request(param, fmt::format("{} must be a string, got {}", param, describe(v)));
  std::string s = v.get<std::string>();
  if (s.empty()) bad_request(param, fmt::format("{} is empty", param));
  return s;
}

std::vector<std::string> choices_of(const Json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) bad_request(param, fmt::format("{} must be a non-empty array of strings", param));
  if (v.size() > kMaxChoices)
    bad_request(param, fmt::format("{} lists {} strings; at most {} are allowed", param, v.size(), kMaxChoices));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string() || v[i].get_ref<const std::string&>().empty())
      bad_request(param, fmt::format("{}[{}] must be a non-empty string, got {}", param, i, describe(v[i])));
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

void response_format(const Json& v, std::vector<Found>& found) {
  if (!v.is_object()) bad_request("response_format", "response_format must be an object with a `type`");
  const Json* type = field_of(v, "type");
  if (type == nullptr || !type->is_string())
    bad_request("response_format", "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
  const std::string t = type->get<std::string>();
  if (t == "text") return;
  if (t == "json_object") {
    // llama-server's extension: a schema beside json_object is the schema to follow.
    if (const Json* schema = field_of(v, "schema")) {
      found.push_back({"response_format", {Kind::kJsonSchema, schema_text(*schema, "response_format.schema"), {}}});
    } else {
      found.push_back({"response_format", {Kind::kJsonObject, "", {}}});
    }
    return;
  }
  if (t != "json_schema")
    bad_request("response_format", fmt::format("response_format.type \"{}\" is not supported; use \"text\", "
                                               "\"json_object\" or \"json_schema\"",
                                               t));
  const Json* js = field_of(v, "json_schema");
  if (js == nullptr || !js->is_object())
    bad_request("response_format", "response_format.json_schema must be an object holding the `schema`");
  const Json* schema = field_of(*js, "schema");
  if (schema == nullptr)
    bad_request("response_format",
                "response_format.json_schema.schema is missing: give the JSON schema the output "
                "must follow");
  if (const Json* strict = field_of(*js, "strict"); strict != nullptr && !strict->is_boolean())
    bad_request("response_format", "response_format.json_schema.strict must be true or false");
  found.push_back({"response_format",
                   {Kind::kJsonSchema,
                    schema_text(*schema, "response_format.json_schema.schema"),
                    {}}});
}

// vLLM's structured_outputs object, and the guided_* fields it replaced.
void vllm_fields(const Json& object, const std::string& prefix, bool guided, std::vector<Found>& found) {
  auto name = [&](const char* key) { return prefix + (guided ? "guided_" : "") + key; };
  auto get = [&](const char* key) { return field_of(object, (std::string(guided ? "guided_" : "") + key).c_str()); };
  if (const Json* v = get("json")) found.push_back({name("json"), {Kind::kJsonSchema, schema_text(*v, name("json")), {}}});
  if (const Json* v = get("regex")) found.push_back({name("regex"), {Kind::kRegex, string_of(*v, name("regex")), {}}});
  if (const Json* v = get("choice"))
    found.push_back({name("choice"), {Kind::kChoice, "", choices_of(*v, name("choice"))}});
  if (const Json* v = get("grammar"))
    found.push_back({name("grammar"), {Kind::kGrammar, string_of(*v, name("grammar")), {}}});
  if (const Json* v = get("json_object")) {
    if (!v->is_boolean())
      bad_request(name("json_object"), fmt::format("{} must be true or false", name("json_object")));
    if (v->get<bool>()) found.push_back({name("json_object"), {Kind::kJsonObject, "", {}}});
  }
}

}  // namespace

std::optional<RequestedConstraint> read_constraint(const Json& body) {
  std::vector<Found> found;
  if (const Json* v = field_of(body, "response_format")) response_format(*v, found);
  if (const Json* v = field_of(body, "structured_outputs")) {
    if (!v->is_object())
      bad_request("structured_outputs", "structured_outputs must be an object (json, regex, choice or grammar)");
    vllm_fields(*v, "structured_outputs.", false, found);
  }
  vllm_fields(body, "", true, found);
  // llama-server's names.
  if (const Json* v = field_of(body, "grammar"))
    found.push_back({"grammar", {Kind::kGrammar, string_of(*v, "grammar"), {}}});
  if (const Json* v = field_of(body, "json_schema"))
    found.push_back({"json_schema", {Kind::kJsonSchema, schema_text(*v, "json_schema"), {}}});
  if (found.empty()) return std::nullopt;
  if (found.size() > 1)
    bad_request(found[1].param,
                fmt::format("{} and {} both constrain the output; give only one", found[0].param, found[1].param));
  return std::move(found[0]);
}

}  // namespace folio::server
