// HttpClient: the benchmark client's one HTTP/1.1 exchange per call, over a
// fresh connection (as a load generator of independent users makes them),
// with Boost.Beast, a timeout for the whole exchange, and the body handed
// over as it arrives so that streamed events are timed when they come.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace folio::cli {

struct HttpResult {
  int status = 0;     // 0: no response (error says why)
  std::string error;  // cannot connect, timed out, cut short
};

// url: "http://host:port" (a trailing path is not allowed). on_body gets the
// status and the body's bytes as they come, whatever the status.
HttpResult http_exchange(const std::string& url, const std::string& method, const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body,
                         double timeout_s, const std::function<void(int status, std::string_view bytes)>& on_body);

}  // namespace folio::cli
