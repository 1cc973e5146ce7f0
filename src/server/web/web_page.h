// WebPage: the page at / - chat, "How big is the cache?" and the engine live
// - and the JSON it reads. Its files are public (they hold nothing of the
// server's); /api/live and /api/capacity answer only with an API key when the
// server has keys, as every route that tells about the server does. The page
// itself speaks to /v1/chat/completions like any other client.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "kv/capacity_planner.h"
#include "server/api/json_fields.h"
#include "server/http/http_server.h"

namespace folio::server {

struct WebPageOptions {
  bool enabled = true;  // --no-web-page: /, /web/ and /api/ answer 404
  // This machine's memory bandwidth in bytes per second, for the planner's
  // "this machine"; called once, when the planner is first opened. Unset:
  // the planner offers no such device.
  std::function<double()> measure_bandwidth;
  // The cascades (--cascade) and their answers so far, for the live view:
  // [{name, small, large, answered_small, answered_large}]. Unset: none.
  std::function<Json()> cascades;
};

class WebPage {
 public:
  explicit WebPage(WebPageOptions options);

  // GET / and GET /web/<file>: the page's files. GET /api/live: the engine's
  // counters and block map. GET /api/capacity: the planner's menus; POST
  // /api/capacity: a plan. `engine` is null while the model loads.
  void handle(const HttpRequest& request, HttpExchange& exchange, const Engine* engine);

 private:
  void file(const HttpRequest& request, HttpExchange& exchange) const;
  void live(HttpExchange& exchange, const Engine* engine) const;
  void capacity(const HttpRequest& request, HttpExchange& exchange, const Engine* engine);
  std::optional<DeviceSpec> this_machine();

  WebPageOptions options_;
  std::chrono::steady_clock::time_point started_;
  std::once_flag measured_;
  std::optional<DeviceSpec> this_machine_;
};

}  // namespace folio::server
