#include "server/api_server.h"

#include <fmt/format.h>

#include <cstdio>

#include "core/version.h"
#include "engine/output_fingerprint.h"
#include "server/api/anthropic_messages.h"
#include "server/api/api_error.h"
#include "server/api/completion_request.h"
#include "server/api/generation_call.h"
#include "server/api/reasoning.h"
#include "server/api/responses_api.h"
#include "server/api/unix_time.h"
#include "server/api/utf8_text.h"
#include "server/exchange_wrappers.h"
#include "server/prometheus_metrics.h"

namespace folio::server {
namespace {

constexpr const char* kModelsPrefix = "/v1/models/";
constexpr const char* kResponsesPrefix = "/v1/responses/";

HttpResponse json_response(const Json& body) {
  HttpResponse r;
  r.body = dump_json(body);
  return r;
}

HttpResponse error_response(const ApiError& e, HttpFields fields = {}) {
  HttpResponse r;
  r.status = e.status();
  r.body = e.body();
  r.fields = std::move(fields);
  return r;
}

bool path_matches(const char* route, const std::string& path) {
  const std::string_view r(route);
  if (r.size() > 1 && r.back() == '/') return path.size() > r.size() && path.compare(0, r.size(), r) == 0;
  return path == r;
}

}  // namespace

ApiServer::ApiServer(ServerOptions options)
    : options_(std::move(options)), started_unix_(unix_seconds()), pool_(options_.models) {
  http_ = std::make_unique<HttpServer>(options_.http, static_cast<HttpHandler&>(*this));
  if (options_.web.enabled) {
    if (!options_.cascades.empty()) options_.web.cascades = [this] { return cascade_answers(); };
    web_ = std::make_unique<WebPage>(options_.web);
  }
  responses_ = std::make_unique<ResponseStore>(options_.max_stored_responses, options_.max_stored_response_bytes);
}

ApiServer::~ApiServer() { stop(); }

int ApiServer::start() { return http_->start(); }

void ApiServer::stop() { http_->stop(); }

LoadedModel ApiServer::make_served(std::shared_ptr<Engine> engine, const std::string& name) {
  auto s = std::make_shared<Served>();
  const ModelSession& session = engine->session();
  s->context.tokenizer = session.tokenizer.get();
  s->context.chat_template = session.chat_template.get();
  if (!options_.chat_template.empty()) {
    s->chat_template = std::make_unique<ChatTemplate>(options_.chat_template);
    s->context.chat_template = s->chat_template.get();
  }
  s->context.default_template_kwargs = options_.chat_template_kwargs;
  s->context.priority_scheduling = engine->config().policy == SchedulingPolicy::kPriority;
  s->context.vocab_size = std::min<std::int64_t>(session.config().vocab_size, session.tokenizer->vocab().size());
  s->context.max_model_len = engine->max_model_len();
  s->context.constraints = session.constraints.get();
  s->context.tool_format = tool_format_of(s->context.chat_template->source());
  s->context.null_tool_call_content = template_tests_for_null_content(s->context.chat_template->source());
  s->context.reasoning = options_.reasoning_parser == "think" ||
                         (options_.reasoning_parser == "auto" && template_thinks(s->context.chat_template->source()));
  s->context.served_model_name = name;
  s->context.max_n = options_.max_n;
  s->context.allow_special_in_messages = options_.allow_special_in_messages;
  s->max_choices_per_client = options_.max_choices_per_client > 0 ? options_.max_choices_per_client
                                                                  : std::max(1, engine->config().max_waiting / 2);
  // A request larger than a client's whole share is refused as too large (400), not as busy.
  s->context.max_choices = std::min(options_.max_choices_per_request, s->max_choices_per_client);
  {
    std::lock_guard lock(mutex_);
    std::shared_ptr<ServerCounters>& finished = finished_by_model_[name];
    if (!finished) finished = std::make_shared<ServerCounters>();
    s->finished = finished.get();
  }
  const std::int64_t num_bytes =
      static_cast<std::int64_t>(session.loaded.weights->total_bytes() + engine->stats().kv_bytes);
  const OutputFingerprint fingerprint =
      output_fingerprint(session, engine->config(), s->context.chat_template->source());
  s->system_fingerprint = fingerprint.id;
  if (options_.log_requests)
    std::fprintf(stderr, "system_fingerprint %s: %s\n", fingerprint.id.c_str(), fingerprint.description.c_str());
  s->engine = std::move(engine);
  return LoadedModel{std::move(s), num_bytes};
}

std::function<LoadedModel()> ApiServer::loader(const std::string& name,
                                               std::function<std::shared_ptr<Engine>()> load) {
  if (!load) return {};
  return [this, name, load = std::move(load)] { return make_served(load(), name); };
}

void ApiServer::set_engine(std::shared_ptr<Engine> engine, std::string source,
                           std::function<std::shared_ptr<Engine>()> reload) {
  const std::string name = options_.served_model_name;
  LoadedModel loaded = make_served(std::move(engine), name);
  pool_.add_loaded(ModelSpec{name, std::move(source), loaded.num_bytes, loader(name, std::move(reload))},
                   std::move(loaded));
  started_ = true;
}

void ApiServer::add_model(const std::string& name, const std::string& source, std::int64_t estimated_bytes,
                          std::function<std::shared_ptr<Engine>()> load) {
  pool_.add(ModelSpec{name, source, estimated_bytes, loader(name, std::move(load))});
}

void ApiServer::begin_drain() { draining_ = true; }

bool ApiServer::wait_until_idle(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  {
    std::unique_lock lock(mutex_);
    if (!idle_.wait_for(lock, timeout, [this] { return num_generating_ == 0; })) return false;
  }
  // The answers are made; now their last bytes must leave.
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return http_->wait_until_quiet(std::max(std::chrono::milliseconds(0), timeout - spent));
}

std::shared_ptr<const ApiServer::Served> ApiServer::served(const std::optional<std::string>& model, bool for_work) {
  if (!started_) throw ApiError(503, "the model is still loading; try again shortly (GET /ready answers 200 when ready)");
  if (for_work && draining_) throw ApiError(503, "the server is shutting down and takes no new requests");
  return pool_.acquire(model.value_or(""));
}

// ---- the HTTP side ----------------------------------------------------------

namespace {

constexpr const char* kRouteList =
    "this server answers POST /v1/completions, POST /v1/chat/completions, POST /v1/messages, POST /v1/responses, GET "
    "and "
    "DELETE /v1/responses/{id}, GET /v1/models, GET "
    "/health, GET /ready, GET "
    "/metrics, POST /tokenize, POST /detokenize, GET /version, POST /models/load and POST /models/unload (and the web "
    "page at GET /, unless --no-web-page)";

}  // namespace

const ApiServer::Route* ApiServer::find_route(const std::string& method, const std::string& path,
                                              std::string* allow) const {
  static const Route kRoutes[] = {
      {"GET", "/health", false, &ApiServer::health},
      {"GET", "/ready", false, &ApiServer::ready},
      {"GET", "/version", false, &ApiServer::version},
      {"GET", "/v1/models", true, &ApiServer::models},
      {"GET", kModelsPrefix, true, &ApiServer::models},
      {"GET", "/metrics", true, &ApiServer::metrics},
      {"POST", "/models/load", true, &ApiServer::load_model},
      {"POST", "/models/unload", true, &ApiServer::unload_model},
      {"POST", "/tokenize", true, &ApiServer::tokenize},
      {"POST", "/detokenize", true, &ApiServer::detokenize},
      {"POST", "/v1/completions", true, &ApiServer::completions},
      {"POST", "/v1/chat/completions", true, &ApiServer::chat_completions},
      {"POST", "/v1/messages", true, &ApiServer::messages},
      {"POST", "/v1/responses", true, &ApiServer::responses},
      {"GET", kResponsesPrefix, true, &ApiServer::stored_response},
      {"DELETE", kResponsesPrefix, true, &ApiServer::stored_response},
      {"POST", "/v1/messages/count_tokens", true, &ApiServer::count_message_tokens},
      {"GET", "/", false, &ApiServer::web_page},
      {"GET", "/web/", false, &ApiServer::web_page},
      {"GET", "/api/live", true, &ApiServer::web_page},
      {"GET", "/api/capacity", true, &ApiServer::web_page},
      {"POST", "/api/capacity", true, &ApiServer::web_page},
  };
  const Route* found = nullptr;
  for (const Route& r : kRoutes) {
    if (!path_matches(r.path, path) || (r.handle == &ApiServer::web_page && !web_)) continue;
    const std::string_view m(r.method);
    if (allow != nullptr) *allow += std::string(allow->empty() ? "" : ", ") + (m == "GET" ? "GET, HEAD" : r.method);
    if (method == m || (m == "GET" && method == "HEAD")) found = &r;
  }
  return found;
}


HttpFields ApiServer::cors_fields(const HttpRequest& head) const {
  const std::string* origin = head.field("origin");
  if (origin == nullptr || options_.allowed_origins.empty()) return {};
  for (const std::string& allowed : options_.allowed_origins) {
    if (allowed == "*") return {{"Access-Control-Allow-Origin", "*"}};
    if (allowed == *origin) return {{"Access-Control-Allow-Origin", *origin}, {"Vary", "Origin"}};
  }
  return {};
}

std::optional<HttpResponse> ApiServer::screen(const HttpRequest& head) {
  std::optional<HttpResponse> refusal = screen_request(head);
  if (refusal) {
    HttpFields cors = cors_fields(head);
    if (!cors.empty() && head.method == "OPTIONS" && head.field("access-control-request-method") != nullptr) {
      // A browser's preflight: what it may send here.
      for (const auto& [name, value] : refusal->fields)
        if (name == "Allow") cors.emplace_back("Access-Control-Allow-Methods", value);
      const std::string* asked = head.field("access-control-request-headers");
      cors.emplace_back("Access-Control-Allow-Headers", asked ? *asked : "Authorization, Content-Type");
      cors.emplace_back("Access-Control-Max-Age", "600");
    }
    refusal->fields.insert(refusal->fields.end(), cors.begin(), cors.end());
  }
  return refusal;
}

std::optional<HttpResponse> ApiServer::screen_request(const HttpRequest& head) {
  std::string allow;
  const Route* route = find_route(head.method, head.path, &allow);
  if (head.path == "*" && head.method == "OPTIONS") allow = "GET, HEAD, POST";
  if (allow.empty())
    return error_response(ApiError(
        404, fmt::format("no route for {} {}; {}", printable(head.method, 32), printable(head.path, 256), kRouteList)));
  if (head.method == "OPTIONS") {
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    r.fields = {{"Allow", allow + ", OPTIONS"}};
    return r;
  }
  if (route == nullptr)
    return error_response(ApiError(405, fmt::format("{} is not allowed on {}; use {}", printable(head.method, 32),
                                                    printable(head.path, 256), allow)),
                          {{"Allow", allow}});
  // Anthropic's clients send the key as x-api-key.
  const std::string* x_api_key = head.field("x-api-key");
  const std::string as_bearer = x_api_key ? "Bearer " + *x_api_key : std::string();
  if (route->needs_auth && !options_.api_keys.accepts(head.field("authorization")) &&
      !(x_api_key && options_.api_keys.accepts(&as_bearer)))
    return error_response(ApiError(401,
                                   "invalid or missing API key: send the header `Authorization: Bearer <key>` with "
                                   "a key the server was started with (--api-key, --api-key-file or FOLIO_API_KEY)",
                                   "", "invalid_api_key"),
                          {{"WWW-Authenticate", "Bearer"}});
  return std::nullopt;
}

void ApiServer::handle(HttpRequest request, HttpExchange& plain_exchange) {
  FieldsExchange exchange(plain_exchange, cors_fields(request));
  try {
    const Route* route = find_route(request.method, request.path, nullptr);
    if (route == nullptr) throw ApiError(404, kRouteList);  // screen() let no such request through
    (this->*route->handle)(request, exchange);
  } catch (const ApiError& e) {
    exchange.respond(error_response(e));
  } catch (const std::exception& e) {
    exchange.respond(error_response(ApiError(500, fmt::format("internal error: {}", e.what()))));
  }
}

std::string ApiServer::error_body(int status, const std::string& message) {
  return folio::server::error_body(status, message);
}

void ApiServer::on_access(const AccessRecord& record) {
  counters_.count_status(record.status);
  if (!options_.log_requests || record.connection_refused) return;
  const std::string line = fmt::format(
      "folio: {} {} {}{} {:.3f} s{}\n", printable(record.method, 32), printable(record.target), record.status,
      record.note.empty() ? "" : " " + record.note, record.seconds, record.client_gone ? " (client hung up)" : "");
  std::lock_guard lock(log_mutex_);
  std::fputs(line.c_str(), stderr);
}

// ---- routes -------------------------------------------------------------------

void ApiServer::health(const HttpRequest&, HttpExchange& ex) {
  // Liveness: 503 while loading (vLLM is not up then either), 200 after,
  // draining included, so that a liveness probe never kills a replica that
  // is finishing its requests.
  if (!started_) throw ApiError(503, "the model is still loading; try again shortly (GET /ready answers 200 when ready)");
  HttpResponse r;
  r.content_type.clear();
  ex.respond(std::move(r));
}

void ApiServer::ready(const HttpRequest&, HttpExchange& ex) {
  // Readiness: 200 only while new work is taken, so that a router or a
  // Service sends none here while loading or draining.
  if (!started_) throw ApiError(503, "the model is still loading; try again shortly (GET /ready answers 200 when ready)");
  if (draining_) throw ApiError(503, "the server is shutting down and takes no new requests");
  HttpResponse r;
  r.content_type.clear();
  ex.respond(std::move(r));
}

void ApiServer::version(const HttpRequest&, HttpExchange& ex) {
  Json v = {{"version", version_string()}, {"commit", git_commit()}};
  if (const auto s = pool_.peek("")) v["system_fingerprint"] = s->system_fingerprint;  // the default model's
  ex.respond(json_response(v));
}

void ApiServer::models(const HttpRequest& req, HttpExchange& ex) {
  std::vector<ModelStatus> status = pool_.status();
  if (status.empty()) {
    status.emplace_back();
    status.back().name = options_.served_model_name;
    status.back().state = ModelState::kLoading;
  }
  Json data = Json::array();
  for (const ModelStatus& m : status) {
    Json model = {{"id", m.name}, {"object", "model"}, {"created", started_unix_}, {"owned_by", "folio"}};
    if (const auto s = pool_.peek(m.name)) model["max_model_len"] = s->context.max_model_len;
    model["status"] = Json{{"value", model_state_name(m.state)}};
    if (!m.error.empty()) model["status"]["error"] = m.error;
    data.push_back(std::move(model));
  }
  for (const CascadeSpec& c : options_.cascades)
    data.push_back(Json{{"id", c.name},
                        {"object", "model"},
                        {"created", started_unix_},
                        {"owned_by", "folio"},
                        {"status", Json{{"value", "cascade"}}},
                        {"cascade", Json{{"small", c.small},
                                         {"large", c.large},
                                         {"measure", cascade_measure_name(c.measure)},
                                         {"threshold", c.threshold}}}});
  if (path_matches(kModelsPrefix, req.path)) {
    const std::string id = req.path.substr(std::string_view(kModelsPrefix).size());
    for (const Json& model : data)
      if (model["id"] == id) return ex.respond(json_response(model));
    std::string names;
    for (const ModelStatus& m : status) names += (names.empty() ? "`" : ", `") + m.name + "`";
    throw ApiError(404, fmt::format("The model `{}` does not exist; this server serves {}", printable(id, 256), names),
                   "model", "model_not_found");
  }
  ex.respond(json_response(Json{{"object", "list"}, {"data", std::move(data)}}));
}

void ApiServer::load_model(const HttpRequest& req, HttpExchange& ex) {
  const Json body = parse_json_object(req.body);
  const std::optional<std::string> name = get_string(body, "model");
  if (!name) bad_request("model", "name the model to load: {\"model\": NAME}, one of GET /v1/models");
  served(name, /*for_work=*/true);
  ex.respond(json_response(Json{{"success", true}, {"model", *name}, {"status", "loaded"}}));
}

void ApiServer::unload_model(const HttpRequest& req, HttpExchange& ex) {
  const Json body = parse_json_object(req.body);
  const std::optional<std::string> name = get_string(body, "model");
  if (!name) bad_request("model", "name the model to unload: {\"model\": NAME}, one of GET /v1/models");
  if (!pool_.has(*name))
    throw ApiError(404, fmt::format("The model `{}` does not exist", printable(*name, 256)), "model",
                   "model_not_found");
  if (!pool_.unload(*name) && pool_.peek(*name))
    throw ApiError(409, fmt::format("the model `{}` is serving requests; unload it when they finish", *name));
  ex.respond(json_response(Json{{"success", true}, {"model", *name}, {"status", "unloaded"}}));
}

void ApiServer::metrics(const HttpRequest&, HttpExchange& ex) {
  std::vector<ModelStatus> status = pool_.status();
  if (status.empty()) {
    status.emplace_back();
    status.back().name = options_.served_model_name;
  }
  // Held while the page is written: what each source points into.
  std::vector<std::shared_ptr<const Served>> held;
  std::vector<EngineStats> stats;
  std::vector<std::optional<KvEventSinkStats>> kv_events;
  held.reserve(status.size());
  stats.reserve(status.size());
  kv_events.reserve(status.size());
  std::vector<ModelMetrics> models;
  for (const ModelStatus& m : status) {
    ModelMetrics mm;
    mm.name = m.name;
    std::shared_ptr<const Served> s = pool_.peek(m.name);
    {
      std::lock_guard lock(mutex_);
      const auto it = finished_by_model_.find(m.name);
      if (it != finished_by_model_.end()) mm.counters = it->second.get();
    }
    if (s) {
      stats.push_back(s->engine->stats());
      mm.engine = &stats.back();
      mm.engine_config = &s->engine->config();
      if (s->engine->config().kv_events) {
        kv_events.push_back(s->engine->config().kv_events->stats());
        mm.kv_events = &*kv_events.back();
      }
      held.push_back(std::move(s));
    }
    models.push_back(mm);
  }
  const HttpServer::Stats http = http_->stats();
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = prometheus_metrics(models, counters_, &http);
  if (!options_.cascades.empty()) {
    r.body +=
        "# HELP folio:cascade_answers_total Answers of a cascade (--cascade) by the model that gave them.\n"
        "# TYPE folio:cascade_answers_total counter\n";
    for (const Json& c : cascade_answers())
      for (const char* by : {"small", "large"})
        r.body += fmt::format("folio:cascade_answers_total{{model_name=\"{}\",answered_by=\"{}\"}} {}\n",
                              c["name"].get<std::string>(), by, c[std::string("answered_") + by].get<std::int64_t>());
  }
  ex.respond(std::move(r));
}

void ApiServer::web_page(const HttpRequest& req, HttpExchange& ex) {
  const std::shared_ptr<const Served> s = pool_.peek("");
  web_->handle(req, ex, s ? s->engine.get() : nullptr);
}

void ApiServer::tokenize(const HttpRequest& req, HttpExchange& ex) {
  const Json body = parse_json_object(req.body);
  auto s = served(get_string(body, "model"), false);
  check_model_name(get_string(body, "model"), s->context);
  const bool return_strs = get_bool(body, "return_token_strs").value_or(false);
  std::vector<TokenId> ids;
  if (field_of(body, "messages") != nullptr) {
    ChatRequest chat;
    read_conversation(body, chat);
    ids = tokenize_chat(chat, s->context, get_bool(body, "add_special_tokens").value_or(false));
  } else {
    auto prompt = get_string(body, "prompt");
    if (!prompt) bad_request("prompt", "give prompt (a string) or messages (a conversation) to tokenize");
    if (!prompt->empty()) ids = tokenize_text(*prompt, s->context, get_bool(body, "add_special_tokens").value_or(true));
  }
  Json out = {{"count", ids.size()}, {"max_model_len", s->context.max_model_len}, {"tokens", ids}};
  if (return_strs) {
    Json strs = Json::array();
    for (TokenId id : ids) strs.push_back(client_text(s->context.tokenizer->token_to_piece(id, true)));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  ex.respond(json_response(out));
}

void ApiServer::detokenize(const HttpRequest& req, HttpExchange& ex) {
  const Json body = parse_json_object(req.body);
  auto s = served(get_string(body, "model"), false);
  check_model_name(get_string(body, "model"), s->context);
  const Json* tokens = field_of(body, "tokens");
  if (tokens == nullptr || !tokens->is_array()) bad_request("tokens", "tokens must be an array of token ids");
  std::vector<TokenId> ids;
  for (const Json& v : *tokens) {
    const std::optional<std::int64_t> id = as_int64(v);
    if (!v.is_number_integer()) bad_request("tokens", "tokens must hold integers only");
    if (!id || *id < 0 || *id >= s->context.vocab_size)
      bad_request("tokens", fmt::format("token id {} is outside the vocabulary: ids must be in [0, {}]", v.dump(),
                                        s->context.vocab_size - 1));
    ids.push_back(static_cast<TokenId>(*id));
  }
  const std::string text = client_text(s->context.tokenizer->decode(ids, /*render_special=*/false));
  ex.respond(json_response(Json{{"prompt", text}}));
}

bool ApiServer::reserve_choices(const std::string& client, int n, int cap) {
  std::lock_guard lock(mutex_);
  int& held = choices_by_client_[client];
  if (held + n > cap) {
    if (held == 0) choices_by_client_.erase(client);
    return false;
  }
  held += n;
  ++num_generating_;
  return true;
}

void ApiServer::release_choices(const std::string& client, int n) {
  std::lock_guard lock(mutex_);
  auto it = choices_by_client_.find(client);
  if (it != choices_by_client_.end() && (it->second -= n) <= 0) choices_by_client_.erase(it);
  if (--num_generating_ == 0) idle_.notify_all();
}

void ApiServer::completions(const HttpRequest& req, HttpExchange& ex) {
  const Json body = parse_json_object(req.body);
  auto s = served(get_string(body, "model"), /*for_work=*/true);
  GenerationJob job = read_completion_request(body, s->context);
  run_job(req, ex, *s, std::move(job), {});
}

void ApiServer::chat_completions(const HttpRequest& req, HttpExchange& ex) {
  run_chat(req, ex, read_chat_completion, {});
}

void ApiServer::run_job(const HttpRequest& req, HttpExchange& ex, const Served& served_model, GenerationJob job,
                        const ShapeMaker& shape) {
  ex.release_body();  // the JSON tree is gone; the job holds token ids
  const int choices = job.num_choices();
  if (!reserve_choices(req.client, choices, served_model.max_choices_per_client))
    throw ApiError(429,
                   fmt::format("this client already has as many completions queued or running as it may ({} per "
                               "client, --max-choices-per-client); wait for some to finish",
                               served_model.max_choices_per_client),
                   "", "rate_limit_exceeded");
  struct Release {
    ApiServer* server;
    const std::string& client;
    int n;
    ~Release() { server->release_choices(client, n); }
  } release{this, req.client, choices};
  GenerationContext context;
  context.engine = served_model.engine;
  context.counters = served_model.finished;
  context.model_name = served_model.context.served_model_name;
  context.system_fingerprint = served_model.system_fingerprint;
  run_generation(context, std::move(job), ex, shape);
}

void ApiServer::run_chat(const HttpRequest& req, HttpExchange& ex, ChatRequest (*read)(const Json&),
                         const ShapeMaker& shape) {
  const Json body = parse_json_object(req.body);
  ChatRequest chat = read(body);
  if (const CascadeSpec* cascade = cascade_named(chat.fields.model))
    return run_cascade(req, ex, body, std::move(chat), *cascade, shape);
  auto s = served(chat.fields.model, /*for_work=*/true);
  GenerationJob job = make_chat_job(std::move(chat), s->context);
  run_job(req, ex, *s, std::move(job), shape);
}

namespace {

// Anthropic's clients read errors in its own shape.
void respond_anthropic_error(HttpExchange& ex, const ApiError& e) {
  HttpResponse r;
  r.status = e.status();
  r.body = anthropic_error_body(e.status(), e.what());
  ex.respond(std::move(r));
}

}  // namespace

void ApiServer::messages(const HttpRequest& req, HttpExchange& ex) {
  try {
    run_chat(
        req, ex, [](const Json& body) { return read_messages_request(body); }, make_messages_shape);
  } catch (const ApiError& e) {
    respond_anthropic_error(ex, e);
  }
}

void ApiServer::responses(const HttpRequest& req, HttpExchange& ex) {
  const Json body = parse_json_object(req.body);
  ChatRequest chat = read_responses_request(body);
  const ResponseStorage storage = read_response_storage(body);
  auto s = served(chat.fields.model, /*for_work=*/true);
  check_model_name(chat.fields.model, s->context);
  continue_stored(*responses_, storage, chat);
  std::vector<ChatMessage> conversation;
  if (storage.store)
    conversation.assign(chat.messages.begin() + (storage.has_instructions ? 1 : 0), chat.messages.end());
  GenerationJob job = make_chat_job(std::move(chat), s->context);
  run_job(req, ex, *s, std::move(job),
          [this, &storage, &conversation](const GenerationJob& j, const Tokenizer& t, const GenerationContext& c) {
            return make_responses_shape(j, t, c, responses_.get(), storage, std::move(conversation));
          });
}

void ApiServer::stored_response(const HttpRequest& req, HttpExchange& ex) {
  const std::string id = req.path.substr(std::string_view(kResponsesPrefix).size());
  auto not_found = [&] {
    ResponseStore::Lookup why = ResponseStore::Lookup::kUnknown;
    responses_->find(id, &why);
    return ApiError(404,
                    why == ResponseStore::Lookup::kEvicted
                        ? fmt::format("Response with id '{}' was evicted: this server keeps its newest {} stored "
                                      "responses (--max-stored-responses)",
                                      printable(id, 128), responses_->max_responses())
                        : fmt::format("Response with id '{}' not found: it was not stored on this server (store: "
                                      "false, another server, or before a restart)",
                                      printable(id, 128)),
                    "", "not_found");
  };
  if (req.method == "DELETE") {
    if (!responses_->erase(id)) throw not_found();
    return ex.respond(json_response(Json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}));
  }
  std::shared_ptr<const StoredResponse> stored = responses_->find(id);
  if (!stored) throw not_found();
  ex.respond(json_response(stored->response));
}

void ApiServer::count_message_tokens(const HttpRequest& req, HttpExchange& ex) {
  try {
    const ChatRequest chat = read_messages_request(parse_json_object(req.body), /*count_only=*/true);
    auto s = served(chat.fields.model, false);
    check_model_name(chat.fields.model, s->context);
    const std::vector<TokenId> ids = tokenize_chat(chat, s->context, /*add_special_tokens=*/false);
    ex.respond(json_response(Json{{"input_tokens", ids.size()}}));
  } catch (const ApiError& e) {
    respond_anthropic_error(ex, e);
  }
}

}  // namespace folio::server
