// JinjaTemplate: parse once, render with fresh interpreter state per call.
#include "jinja/template.h"

#include "jinja/builtins.h"
#include "jinja/error.h"
#include "jinja/json.h"
#include "jinja/parser.h"

namespace folio::jinja {

JinjaTemplate::JinjaTemplate(std::string_view source)
    : body_(std::make_shared<const std::vector<StmtPtr>>(parse_template(source))) {}

std::string JinjaTemplate::render(const std::vector<std::pair<std::string, Value>>& variables,
                                  const RenderOptions& options) const {
  auto globals = std::make_shared<Scope>();
  add_builtin_globals(*globals);
  for (const auto& [name, value] : variables) globals->set(name, value);
  Interpreter interp(options.limits, options.now ? *options.now : std::time(nullptr));
  return interp.render(*body_, globals);
}

std::string JinjaTemplate::render(const nlohmann::ordered_json& variables, const RenderOptions& options) const {
  if (!variables.is_object()) {
    throw JinjaError(JinjaError::Kind::kRuntime, "template variables must be a JSON object, not " +
                                                     std::string(variables.type_name()));
  }
  std::vector<std::pair<std::string, Value>> values;
  for (const auto& [name, value] : variables.items()) values.emplace_back(name, value_from_json(value));
  return render(values, options);
}

}  // namespace folio::jinja
