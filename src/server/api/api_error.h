// ApiError: a refusal the client should see, as the OpenAI API shapes it:
// an HTTP status and {"error": {"message", "type", "param", "code"}}. Every
// handler throws it for bad input; the server turns it into the response and
// goes on serving.
#pragma once

#include <string>

#include "core/error.h"

namespace folio::server {

class ApiError : public Error {
 public:
  // type and code follow OpenAI's words: invalid_request_error,
  // authentication_error, not_found_error, rate_limit_error, server_error;
  // code is empty (null) unless a machine-readable one helps
  // (model_not_found, invalid_api_key, ...). param names the request field.
  ApiError(int status, std::string message, std::string param = "", std::string code = "");

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

  // The JSON body: {"error": {...}}.
  std::string body() const;

  // OpenAI's error type for a status.
  static const char* type_for_status(int status);

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

// {"error": {...}} for a message and status, for refusals raised outside
// handlers (unknown route, body too large).
std::string error_body(int status, const std::string& message, const std::string& param = "",
                       const std::string& code = "");

// 400 for a request field: "<param>: <message>".
[[noreturn]] void bad_request(const std::string& param, const std::string& message);

}  // namespace folio::server
