#include "server/api_server.h"

#include <fmt/format.h>

#include <cstdio>

#include "core/version.h"
#include "server/api_error.h"
#include "server/generation_call.h"
#include "server/prometheus_metrics.h"
#include "server/request_log.h"
#include "tokenizer/utf8.h"

namespace folio::server {
namespace {

constexpr int kListenBacklog = 4096;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void send_error(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Every byte of the longer string is read whatever the contents, so the
  // time taken says nothing about how much of a guess was right.
  const std::size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

ApiServer::ApiServer(ServerOptions options)
    : options_(std::move(options)), listener_(options_.max_connections), started_unix_(unix_now()) {
  listener_.set_payload_max_length(options_.max_body_bytes);
  listener_.set_keep_alive_max_count(1000);
  listener_.set_keep_alive_timeout(5);
  listener_.set_read_timeout(30);
  listener_.set_write_timeout(30);
  listener_.set_tcp_nodelay(true);  // SSE events are small and should leave at once
  listener_.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    RequestLog::current() = RequestLog{};
    RequestLog::current().start = std::chrono::steady_clock::now();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  listener_.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    switch (res.status) {
      case 404:
        message = fmt::format("no route for {} {}; this server answers POST /v1/completions, POST "
                              "/v1/chat/completions, GET /v1/models, GET /health, GET /metrics, POST /tokenize, "
                              "POST /detokenize and GET /version",
                              req.method, req.path);
        break;
      case 413:
        message = fmt::format("the request body is larger than this server's limit of {} bytes; send less, or start "
                              "the server with a larger --max-body-bytes",
                              options_.max_body_bytes);
        break;
      case 414: message = "the request URI is too long"; break;
      case 400: message = "the request is not valid HTTP/1.1"; break;
      default: message = fmt::format("the request failed with HTTP status {}", res.status); break;
    }
    res.set_content(error_body(res.status, message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  listener_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, error_body(500, "internal error: " + what));
  });
  listener_.set_logger([this](const httplib::Request& req, const httplib::Response& res) { log_request(req, res); });
  add_routes();
}

ApiServer::~ApiServer() { stop(); }

int ApiServer::start() {
  const int port = listener_.bind(options_.host, options_.port, kListenBacklog);
  thread_ = std::thread([this] { listener_.listen_after_bind(); });
  // Server::stop() is a no-op until the accept loop runs: wait for it, so
  // that a stop() right after start() (a model that fails to load) works.
  while (!listener_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void ApiServer::stop() {
  if (!thread_.joinable()) return;
  listener_.stop();
  thread_.join();
}

void ApiServer::set_engine(std::shared_ptr<Engine> engine) {
  auto s = std::make_shared<Served>();
  const ModelSession& session = engine->session();
  s->context.tokenizer = session.tokenizer.get();
  s->context.chat_template = session.chat_template.get();
  s->context.vocab_size = std::min<std::int64_t>(session.config().vocab_size, session.tokenizer->vocab().size());
  s->context.max_model_len = engine->max_model_len();
  s->context.served_model_name = options_.served_model_name;
  s->context.max_n = options_.max_n;
  s->engine = std::move(engine);
  std::lock_guard lock(mutex_);
  served_ = std::move(s);
}

void ApiServer::begin_drain() { draining_ = true; }

bool ApiServer::wait_until_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [this] { return num_generating_ == 0; });
}

std::shared_ptr<const ApiServer::Served> ApiServer::served(bool for_work) const {
  std::shared_ptr<const Served> s;
  {
    std::lock_guard lock(mutex_);
    s = served_;
  }
  if (!s) throw ApiError(503, "the model is still loading; try again shortly (GET /health answers 200 when ready)");
  if (for_work && draining_) throw ApiError(503, "the server is shutting down and takes no new requests");
  return s;
}

void ApiServer::check_auth(const httplib::Request& req) const {
  if (options_.api_key.empty()) return;
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  const std::string given = header.compare(0, prefix.size(), prefix) == 0 ? header.substr(prefix.size()) : "";
  if (given.empty() || !constant_time_equal(given, options_.api_key))
    throw ApiError(401, "invalid or missing API key: send the header `Authorization: Bearer <key>` with the key the "
                        "server was started with (--api-key)",
                   "", "invalid_api_key");
}

httplib::Server::Handler ApiServer::route(bool needs_auth, Handler handler) {
  return [this, needs_auth, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    try {
      if (needs_auth) check_auth(req);
      handler(req, res);
    } catch (const ApiError& e) {
      send_error(res, e.status(), e.body());
    } catch (const std::exception& e) {
      send_error(res, 500, error_body(500, fmt::format("internal error: {}", e.what())));
    }
  };
}

void ApiServer::add_routes() {
  listener_.Get("/health", route(false, [this](const auto&, auto& res) { health(res); }));
  listener_.Get("/version", route(false, [](const auto&, auto& res) {
                  res.set_content(dump(Json{{"version", version_string()}, {"commit", git_commit()}}),
                                  "application/json");
                }));
  listener_.Get("/v1/models", route(true, [this](const auto& req, auto& res) { models(req, res); }));
  listener_.Get(R"(/v1/models/(.+))", route(true, [this](const auto& req, auto& res) { models(req, res); }));
  listener_.Get("/metrics", route(true, [this](const auto&, auto& res) { metrics(res); }));
  listener_.Post("/tokenize", route(true, [this](const auto& req, auto& res) { tokenize(req, res); }));
  listener_.Post("/detokenize", route(true, [this](const auto& req, auto& res) { detokenize(req, res); }));
  listener_.Post("/v1/completions",
                 route(true, [this](const auto& req, auto& res) { generate(req, res, Endpoint::kCompletions); }));
  listener_.Post("/v1/chat/completions",
                 route(true, [this](const auto& req, auto& res) { generate(req, res, Endpoint::kChatCompletions); }));
}

void ApiServer::health(httplib::Response& res) const {
  served(/*for_work=*/true);  // 503 while loading or draining
  res.status = 200;
}

void ApiServer::models(const httplib::Request& req, httplib::Response& res) const {
  Json model = {{"id", options_.served_model_name},
                {"object", "model"},
                {"created", started_unix_},
                {"owned_by", "folio"}};
  {
    std::lock_guard lock(mutex_);
    if (served_) model["max_model_len"] = served_->context.max_model_len;
  }
  if (req.matches.size() > 1) {
    if (req.matches[1].str() != options_.served_model_name)
      throw ApiError(404, fmt::format("The model `{}` does not exist; this server serves `{}`", req.matches[1].str(),
                                      options_.served_model_name),
                     "model", "model_not_found");
    res.set_content(dump(model), "application/json");
    return;
  }
  res.set_content(dump(Json{{"object", "list"}, {"data", Json::array({model})}}), "application/json");
}

void ApiServer::metrics(httplib::Response& res) const {
  std::shared_ptr<const Served> s;
  {
    std::lock_guard lock(mutex_);
    s = served_;
  }
  std::optional<EngineStats> stats;
  if (s) stats = s->engine->stats();
  res.set_content(prometheus_metrics(stats ? &*stats : nullptr, counters_, options_.served_model_name),
                  "text/plain; version=0.0.4");
}

void ApiServer::tokenize(const httplib::Request& req, httplib::Response& res) {
  auto s = served(false);
  const Json body = parse_json_object(req.body);
  check_model_field(body, s->context);
  const bool return_strs = get_bool(body, "return_token_strs").value_or(false);
  std::vector<TokenId> ids;
  if (body.contains("messages") && !body["messages"].is_null()) {
    ids = tokenize_chat(body, s->context, get_bool(body, "add_generation_prompt").value_or(true),
                        get_bool(body, "add_special_tokens").value_or(false));
  } else {
    auto prompt = get_string(body, "prompt");
    if (!prompt) bad_request("prompt", "give prompt (a string) or messages (a conversation) to tokenize");
    if (!prompt->empty())
      ids = tokenize_text(*prompt, s->context, get_bool(body, "add_special_tokens").value_or(true));
  }
  Json out = {{"count", ids.size()}, {"max_model_len", s->context.max_model_len}, {"tokens", ids}};
  if (return_strs) {
    Json strs = Json::array();
    for (TokenId id : ids) strs.push_back(utf8::replace_invalid(s->context.tokenizer->token_to_piece(id, true)));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  res.set_content(dump(out), "application/json");
}

void ApiServer::detokenize(const httplib::Request& req, httplib::Response& res) {
  auto s = served(false);
  const Json body = parse_json_object(req.body);
  check_model_field(body, s->context);
  auto it = body.find("tokens");
  if (it == body.end() || !it->is_array()) bad_request("tokens", "tokens must be an array of token ids");
  std::vector<TokenId> ids;
  for (const Json& v : *it) {
    if (!v.is_number_integer()) bad_request("tokens", "tokens must hold integers only");
    const std::int64_t id = v.get<std::int64_t>();
    if (id < 0 || id >= s->context.vocab_size)
      bad_request("tokens", fmt::format("token id {} is outside the vocabulary: ids must be in [0, {}]", id,
                                        s->context.vocab_size - 1));
    ids.push_back(static_cast<TokenId>(id));
  }
  const std::string text = utf8::replace_invalid(s->context.tokenizer->decode(ids, /*render_special=*/false));
  res.set_content(dump(Json{{"prompt", text}}), "application/json");
}

void ApiServer::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  auto s = served(/*for_work=*/true);
  const Json body = parse_json_object(req.body);
  GenerationJob job = endpoint == Endpoint::kChatCompletions ? parse_chat_request(body, s->context)
                                                              : parse_completion_request(body, s->context);
  GenerationContext context;
  context.engine = s->engine;
  context.watcher = &watcher_;
  context.counters = &counters_;
  context.model_name = options_.served_model_name;
  context.socket = HttpListener::current_socket();
  {
    std::lock_guard lock(mutex_);
    ++num_generating_;
  }
  run_generation(context, std::move(job), res, [this] {
    std::lock_guard lock(mutex_);
    if (--num_generating_ == 0) idle_.notify_all();
  });
}

void ApiServer::log_request(const httplib::Request& req, const httplib::Response& res) {
  counters_.count_status(res.status);
  RequestLog& log = RequestLog::current();
  if (!options_.log_requests) {
    log = RequestLog{};
    return;
  }
  const double seconds = log.start == std::chrono::steady_clock::time_point{}
                             ? 0.0
                             : std::chrono::duration<double>(std::chrono::steady_clock::now() - log.start).count();
  std::string tokens;
  if (log.prompt_tokens >= 0) tokens = fmt::format(" {} + {} tokens", log.prompt_tokens, log.completion_tokens);
  const std::string line = fmt::format("folio: {} {} {}{} {:.3f} s{}\n", req.method, req.path, res.status, tokens,
                                       seconds, log.client_gone ? " (client hung up)" : "");
  log = RequestLog{};
  std::lock_guard lock(log_mutex_);
  std::fputs(line.c_str(), stderr);
}

}  // namespace folio::server
