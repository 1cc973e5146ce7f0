// ConnectionExchange: one request's answer channel, on the worker's side of a
// connection. It formats the answer (status line, framing, chunks) and hands
// the bytes to the connection's I/O thread; it counts what is not yet written
// so that a slow reader holds its writer back, and it learns from the
// connection when the client is gone. Internal to HttpServer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "server/http/http_connection.h"

namespace folio::server {

// What the connection (I/O thread) and its exchange (worker) share.
struct ExchangeState {
  std::mutex mutex;
  std::condition_variable drained;
  std::size_t unsent = 0;  // bytes the exchange queued that are not yet written
  bool gone = false;
  std::function<void()> on_gone;
  int status = 0;
  std::string note;
  bool body_released = false;
};

class ConnectionExchange final : public HttpExchange {
 public:
  ConnectionExchange(std::shared_ptr<HttpConnection> connection, std::shared_ptr<ExchangeState> state,
                     ConnectionHost& host, std::uint64_t body_bytes, int version, bool keep_alive, bool head_only);

  void respond(HttpResponse response) override;
  void begin_stream(int status, const std::string& content_type, const HttpFields& fields) override;
  bool write(std::string bytes) override;
  void end_stream() override;
  bool client_gone() const override;
  void on_gone(std::function<void()> callback) override;
  void release_body() override;
  void note(std::string text) override;

  // After the handler returns: what it left unsaid (a 500 in `error_body`
  // when it gave no answer), then the connection goes on.
  void finish(const std::string& error_body);

 private:
  void post(std::string bytes);

  std::shared_ptr<HttpConnection> connection_;
  std::shared_ptr<ExchangeState> state_;
  ConnectionHost& host_;
  std::uint64_t body_bytes_;
  int version_;
  bool keep_alive_;
  bool head_only_;
  bool answered_ = false;
  bool streaming_ = false;
  bool chunked_ = false;
  bool ended_ = false;
};

// The status line and header fields, through the blank line; `framing` is
// the Content-Length or Transfer-Encoding line.
std::string response_head(int status, const std::string& content_type, const HttpFields& fields,
                          const std::string& framing, bool keep_alive, int version);
// One chunk of a chunked body.
std::string chunk(std::string_view bytes);

}  // namespace folio::server
