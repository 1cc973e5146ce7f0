// JinjaTemplate: a Jinja template parsed once and rendered many times (from
// any number of threads), in the environment Hugging Face gives chat
// templates: trim_blocks, lstrip_blocks, break/continue, raise_exception,
// strftime_now, and a tojson that keeps non-ASCII text.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/interpreter.h"

namespace folio::jinja {

struct RenderOptions {
  JinjaLimits limits;
  std::optional<std::time_t> now;  // the clock of strftime_now(); unset: the current time
};

class JinjaTemplate {
 public:
  // Parses `source`; a template that does not parse throws a syntax JinjaError
  // with the line and column of the problem.
  explicit JinjaTemplate(std::string_view source);

  // Renders with these top-level variables (over the global functions).
  std::string render(const std::vector<std::pair<std::string, Value>>& variables,
                     const RenderOptions& options = {}) const;
  // The same, with the variables as a JSON object.
  std::string render(const nlohmann::ordered_json& variables, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<StmtPtr>> body_;
};

}  // namespace folio::jinja
