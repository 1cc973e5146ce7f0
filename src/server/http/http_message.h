// HttpRequest and HttpResponse: one exchange as the server's handlers see it,
// with nothing of the HTTP library in them. A request reaches a handler whole
// (its body decoded and within the limits); a response is written by the
// connection, which adds the framing fields (Content-Length, Connection, Date).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace folio::server {

using HttpFields = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // as sent (logs print it escaped)
  std::string path;    // the target's path, percent-decoded; never holds a control character
  std::string query;   // after '?', as sent
  int version = 11;    // 10 or 11
  HttpFields fields;   // in the order sent, names as sent
  std::string body;    // chunked framing removed
  std::string client;  // the peer's address: the unit of the per-client limits

  // The first field of that name (case-insensitive), or nullptr.
  const std::string* field(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HttpFields fields;  // more header fields: Allow, Retry-After, Cache-Control, ...
};

// "HTTP/1.1"'s reason phrase for a status ("Not Found"); "Unknown" for others.
const char* reason_phrase(int status);

// Case-insensitive ASCII comparison, as header names and tokens compare.
bool equals_ignore_case(std::string_view a, std::string_view b);

// `text` as a log may print it: printable ASCII as it is, every other byte
// (CR, LF, NUL, escapes, UTF-8) as \xNN, cut to max_bytes with "..." after.
std::string printable(std::string_view text, std::size_t max_bytes = 512);

}  // namespace folio::server
