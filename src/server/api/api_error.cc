#include "server/api/api_error.h"

#include "server/api/json_fields.h"

namespace folio::server {

ApiError::ApiError(int status, std::string message, std::string param, std::string code)
    : Error(message), status_(status), type_(type_for_status(status)), param_(std::move(param)),
      code_(std::move(code)) {}

const char* ApiError::type_for_status(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: break;
  }
  return status >= 500 ? "server_error" : "invalid_request_error";
}

std::string ApiError::body() const { return error_body(status_, what(), param_, code_); }

std::string error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  Json error = {
      {"message", message},
      {"type", ApiError::type_for_status(status)},
      {"param", param.empty() ? Json(nullptr) : Json(param)},
      {"code", code.empty() ? Json(nullptr) : Json(code)},
  };
  return dump_json(Json{{"error", error}});
}

void bad_request(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

}  // namespace folio::server
