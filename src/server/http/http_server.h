// HttpServer: HTTP/1.1 over Boost.Asio on one I/O thread, for a handler that
// answers whole requests on worker threads. The front door is hostile ground,
// so every cost a client can impose is bounded: connections (in all and per
// client; the excess refused at once, idle keep-alive connections closed first
// to make room), the time to send a header and a body, idle time between
// requests, the header and body bytes (RequestParser), the bodies held at once
// across all connections, and the bytes a slow reader leaves unsent. A
// connection that is idle or still sending costs no thread: only a whole,
// valid request reaches a worker. A client that half-closes after its request
// still gets the whole answer; only a reset or a failed write means it left.
// (Why Boost.Beast rather than libmicrohttpd or cpp-httplib: README.)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/http/http_message.h"
#include "server/http/request_parser.h"

namespace folio::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  HttpLimits limits;
  int max_connections = 1024;                           // open at once; more are refused with 503
  int max_connections_per_client = 512;                 // from one address; more are refused with 429
  std::chrono::milliseconds header_timeout{10'000};     // first byte to the end of the header
  std::chrono::milliseconds body_timeout{60'000};       // end of the header to the end of the body
  std::chrono::milliseconds keep_alive_timeout{5'000};  // idle before a request's first byte
  std::chrono::milliseconds write_timeout{30'000};      // a write that makes no progress
  std::size_t max_unsent_bytes = 1 << 20;               // a streaming handler waits above this
  std::uint64_t max_pending_body_bytes = 64ull << 20;   // bodies being read or parsed, all connections
  int max_workers = 1024;                               // threads running handlers, at most
  int backlog = 4096;
};

// One request's answer channel, used from the handler's worker thread.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  // The whole answer, once.
  virtual void respond(HttpResponse response) = 0;
  // Or a stream: the status and header now, then write() the body as it
  // comes.
  virtual void begin_stream(int status, const std::string& content_type, const HttpFields& fields) = 0;
  // Queues body bytes; waits while more than max_unsent_bytes are unsent, up
  // to the write timeout. False once the client is gone (nothing more is sent).
  virtual bool write(std::string bytes) = 0;
  virtual void end_stream() = 0;

  virtual bool client_gone() const = 0;
  // Runs once, on the I/O thread, when the client resets or a write fails;
  // at once when it is already gone. Replaces an earlier callback.
  virtual void on_gone(std::function<void()> callback) = 0;
  // The request's body and whatever was parsed from it are dropped: its bytes
  // stop counting against max_pending_body_bytes.
  virtual void release_body() = 0;
  // Appended to the request's access-log line ("12 + 30 tokens").
  virtual void note(std::string text) = 0;
};

// One finished exchange, for the access log and the status counters.
struct AccessRecord {
  std::string method;  // as sent; "-" when the request line was never read
  std::string target;  // as sent: escape it before printing
  std::string client;
  int status = 0;
  double seconds = 0;               // from the request's first byte to its last byte written
  bool client_gone = false;         // the client reset or stopped reading before the end
  bool connection_refused = false;  // refused on arrival (too many connections): no request was read
  std::string note;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // I/O thread, once the header is in, before any byte of the body is read:
  // a response refuses the request (route, method, authentication) at the
  // cost of its header alone. Must not block.
  virtual std::optional<HttpResponse> screen(const HttpRequest& head) = 0;
  // A worker thread, with the whole request. Answers through `exchange`; a
  // handler that returns without answering gets a 500.
  virtual void handle(HttpRequest request, HttpExchange& exchange) = 0;
  // Any thread, once per exchange and per refusal, when its last byte is out.
  virtual void on_access(const AccessRecord& record) = 0;
  // The JSON body of a refusal made below the handler (a malformed request,
  // a timeout, too many connections), in the handler's error shape.
  virtual std::string error_body(int status, const std::string& message) = 0;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler& handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and serves on a thread of its own; returns the port. Throws Error
  // when the address cannot be bound.
  int start();
  // Waits until no answer is being made or written; true when none is.
  bool wait_until_quiet(std::chrono::milliseconds timeout) const;
  // Closes the listener and every connection (their clients count as gone),
  // waits for running handlers and joins every thread.
  void stop();

  struct Stats {
    int num_connections = 0;
    int num_idle_connections = 0;
    std::int64_t num_refused_connections = 0;  // over max_connections or max_connections_per_client
    std::int64_t num_evicted_idle = 0;         // idle keep-alive connections closed to make room
    std::int64_t num_slow_headers_closed = 0;  // connections whose header was still arriving, closed to make room
    std::uint64_t pending_body_bytes = 0;
    int num_workers = 0;
  };
  Stats stats() const;

  const HttpServerOptions& options() const { return options_; }

 private:
  class Impl;
  HttpServerOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace folio::server
