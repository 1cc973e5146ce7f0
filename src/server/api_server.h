// ApiServer: folio's OpenAI-compatible HTTP API over one Engine. Routes:
// POST /v1/completions and /v1/chat/completions (JSON or server-sent events),
// GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize and
// /detokenize (vLLM's shapes), GET /version. It listens before the model has
// loaded (/health answers 503 until set_engine), refuses new work while it
// drains, and turns every bad request into an OpenAI-shaped error without
// ever stopping. JSON lives here and nowhere below: the engine sees token ids
// and SamplingParams; HTTP threads wait on engine streams, one engine thread
// runs the model.
//
// HTTP library: cpp-httplib, as Debian packages it (libcpp-httplib-dev), not
// Boost.Beast. The server's work is a handful of JSON routes and long-lived
// SSE streams that each block on their own engine stream; a thread per
// connection is the simplest correct model for that, and a pool of a few
// hundred mostly idle threads is cheap next to a forward pass. cpp-httplib
// gives exactly that in one small packaged library; Beast would bring
// Boost.Asio's asynchronous style (callbacks or coroutines through every
// handler) to solve a concurrency problem this server does not have.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "server/disconnect_watcher.h"
#include "server/http_listener.h"
#include "server/openai_request.h"
#include "server/server_counters.h"

namespace folio::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port
  std::string api_key;                   // empty: no authentication
  std::string served_model_name;         // the name clients must use in `model`
  int max_n = 16;                        // most completions per prompt
  std::size_t max_body_bytes = 16u << 20;
  int max_connections = 512;             // connections served at once (one thread each)
  bool log_requests = true;              // one stderr line per request
};

class ApiServer {
 public:
  explicit ApiServer(ServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and starts serving on a thread of its own; returns the port. Throws
  // Error when the address cannot be bound.
  int start();
  // The model is loaded: generation routes open and /health answers 200.
  void set_engine(std::shared_ptr<Engine> engine);
  // New work is refused with 503 from now on; running requests go on.
  void begin_drain();
  // Waits until no response is being generated or written; true when idle.
  bool wait_until_idle(std::chrono::milliseconds timeout);
  // Closes the listener and every connection; joins the server thread.
  void stop();

  const ServerOptions& options() const { return options_; }

 private:
  struct Served {
    std::shared_ptr<Engine> engine;
    ModelContext context;
  };
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  void add_routes();
  // A route's handler with authentication and error handling around it.
  httplib::Server::Handler route(bool needs_auth, Handler handler);
  void check_auth(const httplib::Request& req) const;
  // The loaded model; throws 503 while loading or draining when `for_work`.
  std::shared_ptr<const Served> served(bool for_work) const;

  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void health(httplib::Response& res) const;
  void models(const httplib::Request& req, httplib::Response& res) const;
  void metrics(httplib::Response& res) const;
  void log_request(const httplib::Request& req, const httplib::Response& res);

  ServerOptions options_;
  HttpListener listener_;
  DisconnectWatcher watcher_;
  ServerCounters counters_;
  std::int64_t started_unix_ = 0;
  std::thread thread_;

  mutable std::mutex mutex_;
  std::shared_ptr<const Served> served_;
  std::atomic<bool> draining_{false};
  int num_generating_ = 0;
  std::condition_variable idle_;
  std::mutex log_mutex_;
};

// Equal strings, compared in time that depends on their lengths only.
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace folio::server
