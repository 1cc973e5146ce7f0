// JinjaError: what went wrong while parsing or rendering a Jinja template,
// with its kind and, where known, the template line and column it came from.
#pragma once

#include <string>

#include "core/error.h"

namespace folio::jinja {

class JinjaError : public Error {
 public:
  enum class Kind {
    kSyntax,   // the template does not parse
    kRuntime,  // an operation failed while rendering (bad type, undefined attribute, ...)
    kRaised,   // the template called raise_exception(message): it rejects the input
    kLimit,    // a sandbox bound (steps, output size, call depth) was hit
  };

  // line/column are 1-based; 0 means unknown (yet).
  JinjaError(Kind kind, std::string detail, int line = 0, int column = 0)
      : Error(format(kind, detail, line, column)), kind_(kind), detail_(std::move(detail)),
        line_(line), column_(column) {}

  Kind kind() const { return kind_; }
  // The message alone, without the location (for raise_exception: the template's own words).
  const std::string& detail() const { return detail_; }
  int line() const { return line_; }
  int column() const { return column_; }

  // The same error, placed at a line (when the place it was thrown from knew none).
  JinjaError at(int line, int column = 0) const { return JinjaError(kind_, detail_, line, column); }

  static const char* kind_name(Kind kind) {
    switch (kind) {
      case Kind::kSyntax: return "syntax";
      case Kind::kRuntime: return "runtime";
      case Kind::kRaised: return "raised";
      case Kind::kLimit: return "limit";
    }
    return "unknown";
  }

 private:
  static std::string format(Kind kind, const std::string& detail, int line, int column) {
    std::string where = "chat template";
    if (line > 0) where += " line " + std::to_string(line);
    if (column > 0) where += ", column " + std::to_string(column);
    switch (kind) {
      case Kind::kSyntax:
        return where + ": syntax error: " + detail + "; fix the template source";
      case Kind::kRuntime: return where + ": " + detail;
      case Kind::kRaised: return where + ": the template rejected the request: " + detail;
      case Kind::kLimit: return where + ": " + detail;
    }
    return where + ": " + detail;
  }

  Kind kind_;
  std::string detail_;
  int line_;
  int column_;
};

// Throws a runtime JinjaError whose line the interpreter fills in.
[[noreturn]] inline void runtime_fail(std::string detail) {
  throw JinjaError(JinjaError::Kind::kRuntime, std::move(detail));
}

}  // namespace folio::jinja
