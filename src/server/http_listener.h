// HttpListener: cpp-httplib's Server with folio's connection loop. Each
// accepted connection is served on one pool thread through a poll()-based
// stream (no select(), so descriptors past FD_SETSIZE are safe), the listen
// backlog is large enough for hundreds of clients connecting at once, and the
// handler thread can name its own socket, which the server watches for
// clients that hang up while their request is still running.
// (Why cpp-httplib rather than Boost.Beast: see api_server.h.)
#pragma once

#include <httplib.h>

#include <string>

namespace folio::server {

class HttpListener : public httplib::Server {
 public:
  // num_threads: connections served at once (others wait for a thread).
  explicit HttpListener(int num_threads);

  // Binds host:port (port 0: any free port) and listens with `backlog`
  // pending connections. Returns the bound port; throws Error when it cannot.
  int bind(const std::string& host, int port, int backlog);

  // The socket of the connection the calling thread serves; -1 outside a
  // handler. Valid until the handler (and its content provider) returns.
  static int current_socket();

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Waits until the next request's first bytes arrive; false on keep-alive
  // timeout, a closed connection, or the listener stopping.
  bool wait_for_request(int sock) const;
};

}  // namespace folio::server
