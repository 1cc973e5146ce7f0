#include "server/web/web_page.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "server/api/api_error.h"
#include "server/api/json_fields.h"
#include "server/web/capacity_api.h"
#include "server/web/live_status.h"
#include "server/web/web_assets.h"

namespace folio::server {
namespace {

constexpr std::string_view kFilesPrefix = "/web/";

// The page runs only its own files: no inline script, no other origin, no frame.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const WebAsset* find_asset(std::string_view name) {
  const auto assets = web_assets();
  auto it = std::lower_bound(assets.begin(), assets.end(), name,
                             [](const WebAsset& a, std::string_view n) { return a.name < n; });
  return it != assets.end() && it->name == name ? &*it : nullptr;
}

HttpResponse json_response(const Json& body) {
  HttpResponse r;
  r.body = dump_json(body);
  r.fields = {{"Cache-Control", "no-store"}};
  return r;
}

// The served model as the planner sees it: its shape and its weights as stored.
PlannerChoices choices_for(const Engine* engine) {
  PlannerChoices c;
  if (engine == nullptr) return c;
  ModelShape m = model_shape(engine->session().config());
  const Weights& weights = *engine->session().loaded.weights;
  for (const auto& [name, tensor] : weights.tensors()) m.num_params += tensor.numel();
  c.loaded_model = m;
  c.loaded_weight_bytes = static_cast<std::int64_t>(weights.total_bytes());
  return c;
}

}  // namespace

WebPage::WebPage(WebPageOptions options) : options_(std::move(options)), started_(std::chrono::steady_clock::now()) {}

void WebPage::handle(const HttpRequest& request, HttpExchange& exchange, const Engine* engine) {
  if (request.path == "/api/live") return live(exchange, engine);
  if (request.path == "/api/capacity") return capacity(request, exchange, engine);
  file(request, exchange);
}

void WebPage::file(const HttpRequest& request, HttpExchange& exchange) const {
  std::string_view name = request.path;
  if (name == "/")
    name = "index.html";
  else if (name.starts_with(kFilesPrefix))
    name.remove_prefix(kFilesPrefix.size());
  const WebAsset* asset = find_asset(name);
  if (asset == nullptr) throw ApiError(404, fmt::format("the web page has no file {}", printable(request.path, 256)));
  HttpResponse r;
  r.fields = {{"ETag", std::string(asset->etag)},
              {"Cache-Control", "no-cache"},
              {"X-Content-Type-Options", "nosniff"},
              {"Content-Security-Policy", kContentSecurityPolicy},
              {"Referrer-Policy", "no-referrer"}};
  const std::string* seen = request.field("if-none-match");
  if (seen != nullptr && *seen == asset->etag) {
    r.status = 304;
    r.content_type.clear();
  } else {
    r.content_type = std::string(asset->content_type);
    r.body = std::string(asset->body);
  }
  exchange.respond(std::move(r));
}

void WebPage::live(HttpExchange& exchange, const Engine* engine) const {
  const double time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  Json j = {{"time_s", time_s}, {"ready", false}};
  if (engine != nullptr) {
    // The block counts of the same moment as the map, so that the page's grid
    // and its "in use" and "cached" figures agree.
    EngineStats stats = engine->stats();
    const std::string map = engine->kv_block_map(&stats.kv);
    j = live_json(stats, map, time_s);
    j["ready"] = true;
  }
  j["cascades"] = options_.cascades ? options_.cascades() : Json::array();
  exchange.respond(json_response(j));
}

void WebPage::capacity(const HttpRequest& request, HttpExchange& exchange, const Engine* engine) {
  PlannerChoices choices = choices_for(engine);
  choices.this_machine = this_machine();
  if (request.method == "POST") {
    const Json body = parse_json_object(request.body);
    return exchange.respond(json_response(capacity_answer(body, choices)));
  }
  exchange.respond(json_response(capacity_menus(choices)));
}

std::optional<DeviceSpec> WebPage::this_machine() {
  std::call_once(measured_, [this] {
    if (!options_.measure_bandwidth) return;
    const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_bytes <= 0) return;
    this_machine_ =
        DeviceSpec{"this machine", static_cast<std::int64_t>(pages) * page_bytes, options_.measure_bandwidth()};
  });
  return this_machine_;
}

}  // namespace folio::server
