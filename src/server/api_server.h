// ApiServer: folio's OpenAI-compatible HTTP API over one Engine. Routes:
// POST /v1/completions and /v1/chat/completions (JSON or server-sent events),
// GET /v1/models, GET /health (liveness), GET /ready (readiness), GET
// /metrics (Prometheus), POST /tokenize and /detokenize (vLLM's shapes), GET
// /version, POST /models/load and /models/unload. Several models may be
// served, each routed to by a request's `model` (a ModelPool loads and
// unloads them); the first is the default. It listens before the model has loaded (/health and /ready answer
// 503 until set_engine), refuses new work while it drains (/ready turns 503,
// /health stays 200), and turns every bad request into an OpenAI-shaped error
// without ever stopping. Route, method and key are checked on the header
// alone, before a body is read. JSON lives here and nowhere below: the engine
// sees token ids and SamplingParams; worker threads wait on engine streams,
// one engine thread runs the model. The HTTP layer is HttpServer (Boost.Beast
// over Asio).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/engine.h"
#include "server/api/chat_request.h"
#include "server/api/generation_call.h"
#include "server/api/generation_job.h"
#include "server/api/response_store.h"
#include "server/api/server_counters.h"
#include "server/api_keys.h"
#include "server/cascade.h"
#include "server/http/http_server.h"
#include "server/model_pool.h"
#include "server/web/web_page.h"

namespace folio::server {

struct ServerOptions {
  HttpServerOptions http;                    // address, limits, timeouts, connections
  ApiKeys api_keys;                          // empty: no authentication
  std::string served_model_name;             // the name clients must use in `model`
  int max_n = 16;                            // most completions per prompt
  int max_choices_per_request = 64;          // prompts x n in one request
  int max_choices_per_client = 0;            // queued or running from one address; 0: half the engine's --max-waiting
  bool allow_special_in_messages = false;    // chat text may become special tokens (the old, unsafe reading)
  bool log_requests = true;                  // one stderr line per request
  WebPageOptions web;                        // the page at / (server/web/)
  std::string chat_template;                 // --chat-template: this template's text instead of the model's
  std::vector<std::string> allowed_origins;  // --allowed-origins: CORS for browser clients ("*": any); empty: none
  std::string reasoning_parser = "auto";     // --reasoning-parser: auto (when the template thinks), think, none
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();  // defaults under a request's own
  ModelPoolLimits models;                    // how many models stay loaded, in how many bytes, for how long
  std::size_t max_stored_responses = 1024;               // Responses API store: the newest kept (0: none)
  std::size_t max_stored_response_bytes = 256ull << 20;  // ... and their bytes in all
  std::vector<CascadeSpec> cascades;         // --cascade: names a small model answers first, a large one if unsure
};

class ApiServer final : private HttpHandler {
 public:
  explicit ApiServer(ServerOptions options);
  ~ApiServer() override;
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and starts serving on a thread of its own; returns the port. Throws
  // Error when the address cannot be bound.
  int start();
  // The model is loaded: generation routes open, /health and /ready answer
  // 200. It is served as served_model_name, the default model; with
  // `reload` it may be unloaded like the others and loaded again by it.
  void set_engine(std::shared_ptr<Engine> engine, std::string source = "",
                  std::function<std::shared_ptr<Engine>()> reload = {});
  // One more model, loaded by `load` when a request first names it (and
  // again after an unload); `estimated_bytes` is what it is expected to hold.
  void add_model(const std::string& name, const std::string& source, std::int64_t estimated_bytes,
                 std::function<std::shared_ptr<Engine>()> load);
  // The models served; the serve loop sweeps the idle ones, shutdown drains.
  ModelPool& models() { return pool_; }
  // New work is refused with 503 from now on (and by /ready); running
  // requests go on.
  void begin_drain();
  // Waits until no response is being generated or written; true when idle.
  bool wait_until_idle(std::chrono::milliseconds timeout);
  // Closes the listener and every connection; joins the server's threads.
  void stop();

  const ServerOptions& options() const { return options_; }

 private:
  using Served = ServedModel;
  using Method = void (ApiServer::*)(const HttpRequest&, HttpExchange&);
  struct Route {
    const char* method;  // GET also answers HEAD
    const char* path;    // exact, or a prefix when it ends in '/'
    bool needs_auth;
    Method handle;
  };

  // HttpHandler
  std::optional<HttpResponse> screen(const HttpRequest& head) override;
  // The CORS field a response to `head` carries: the origin when it is
  // allowed; nothing when CORS is off or the request names no origin.
  HttpFields cors_fields(const HttpRequest& head) const;
  std::optional<HttpResponse> screen_request(const HttpRequest& head);
  void handle(HttpRequest request, HttpExchange& exchange) override;
  void on_access(const AccessRecord& record) override;
  std::string error_body(int status, const std::string& message) override;

  // The route for a method and path; `allow` gets the methods the path takes
  // ("" for a path no route has), for 405 and OPTIONS.
  const Route* find_route(const std::string& method, const std::string& path, std::string* allow) const;
  // The model a request names (empty: the default), loaded; throws 503
  // while the first one loads, or draining when `for_work`, and what
  // ModelPool::acquire throws.
  std::shared_ptr<const Served> served(const std::optional<std::string>& model, bool for_work);
  // A pool loader that makes what `load` opens ready under `name`; none without `load`.
  std::function<LoadedModel()> loader(const std::string& name, std::function<std::shared_ptr<Engine>()> load);
  // `engine` made ready for requests under `name`.
  LoadedModel make_served(std::shared_ptr<Engine> engine, const std::string& name);

  // Runs a read job, within the client's share of choices.
  void run_job(const HttpRequest& req, HttpExchange& ex, const Served& s, GenerationJob job, const ShapeMaker& shape);
  void completions(const HttpRequest& req, HttpExchange& ex);
  void chat_completions(const HttpRequest& req, HttpExchange& ex);
  // Anthropic's Messages API: errors in its shape too.
  void messages(const HttpRequest& req, HttpExchange& ex);
  void count_message_tokens(const HttpRequest& req, HttpExchange& ex);
  // OpenAI's Responses API, and its stored responses (GET and DELETE /v1/responses/{id}).
  void responses(const HttpRequest& req, HttpExchange& ex);
  void stored_response(const HttpRequest& req, HttpExchange& ex);
  // A chat request of any API, read by `read` from the body, run in `shape`.
  void run_chat(const HttpRequest& req, HttpExchange& ex, ChatRequest (*read)(const Json&), const ShapeMaker& shape);
  // A chat completion asked of a cascade: the small model's answer when it is
  // sure enough, the large one's otherwise; a header says which.
  void run_cascade(const HttpRequest& req, HttpExchange& ex, const Json& body, ChatRequest chat,
                   const CascadeSpec& cascade, const ShapeMaker& shape);
  const CascadeSpec* cascade_named(const std::optional<std::string>& name) const;
  // Each cascade and its answers so far, by the model that gave them.
  Json cascade_answers() const;
  void tokenize(const HttpRequest& req, HttpExchange& ex);
  void detokenize(const HttpRequest& req, HttpExchange& ex);
  void health(const HttpRequest& req, HttpExchange& ex);
  void ready(const HttpRequest& req, HttpExchange& ex);
  void version(const HttpRequest& req, HttpExchange& ex);
  void models(const HttpRequest& req, HttpExchange& ex);
  void metrics(const HttpRequest& req, HttpExchange& ex);
  // POST /models/load and /models/unload {"model": NAME} (llama-server's router routes).
  void load_model(const HttpRequest& req, HttpExchange& ex);
  void unload_model(const HttpRequest& req, HttpExchange& ex);
  void web_page(const HttpRequest& req, HttpExchange& ex);

  // A client's share of the engine's queue: choices queued or running.
  bool reserve_choices(const std::string& client, int n, int cap);
  void release_choices(const std::string& client, int n);

  ServerOptions options_;
  ServerCounters counters_;
  std::int64_t started_unix_ = 0;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<WebPage> web_;  // null with --no-web-page
  std::unique_ptr<ResponseStore> responses_;

  mutable std::mutex mutex_;
  ModelPool pool_;
  std::map<std::string, std::shared_ptr<ServerCounters>> finished_by_model_;  // kept across unloads
  std::atomic<bool> started_{false};  // the first model has loaded
  std::atomic<bool> draining_{false};
  int num_generating_ = 0;
  std::condition_variable idle_;
  std::map<std::string, int> choices_by_client_;
  std::map<std::pair<std::string, std::string>, std::int64_t> cascade_answers_;  // (cascade, small|large) -> answers
  std::mutex log_mutex_;
};

}  // namespace folio::server
