// HttpConnection: one client connection's life on the I/O thread: wait for a
// request (keep-alive timeout), read its header (one deadline for all of it)
// and body (another), screen it, hand it to a worker, write the answer as the
// worker produces it, then the next request or a graceful close. A read is
// outstanding until the client's FIN, so a reset is seen at once. A FIN while
// an answer is being made is a half-close, not a hang-up (HTTP allows it, and
// tools send one): the answer goes on, nothing unasked is sent, and the
// client counts as gone only when its socket reports an error (the reset a
// closed socket answers a write with) or a write fails.
// Internal to HttpServer: http_server.cc and http_exchange.h include it.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/http/http_server.h"
#include "server/http/request_parser.h"

namespace folio::server {

class HttpConnection;
struct ExchangeState;

// What a connection needs of its server. I/O thread, unless said otherwise.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  virtual const HttpServerOptions& options() const = 0;
  virtual HttpHandler& handler() = 0;
  // Any thread.
  virtual void run_on_worker(std::function<void()> job) = 0;
  virtual bool reserve_body(std::uint64_t bytes) = 0;
  virtual void release_body(std::uint64_t bytes) = 0;
  // The connection waits for a request with nothing buffered: the server may
  // close it to make room for a new one.
  virtual void idle(HttpConnection& connection, bool is_idle) = 0;
  // The connection is reading a request's header (since header_since()): the
  // server may close it to make room once it has taken a while.
  virtual void reading_header(HttpConnection& connection, bool is_reading) = 0;
  virtual void closed(HttpConnection& connection) = 0;
  virtual bool stopping() const = 0;
  // A request is being answered (from its dispatch until its last byte is written).
  virtual void busy(bool is_busy) = 0;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(boost::asio::ip::tcp::socket socket, std::string client, ConnectionHost& host);
  ~HttpConnection();

  // Serves requests until the connection closes.
  void start();
  // Refuses the connection itself (too many): the response, then a graceful close.
  void refuse(int status, const std::string& message, const HttpFields& fields);
  // Closes at once; a running exchange's client counts as gone.
  void close();

  const std::string& client() const { return client_; }
  bool is_closed() const { return closed_; }
  std::chrono::steady_clock::time_point idle_since() const { return idle_since_; }
  std::chrono::steady_clock::time_point header_since() const { return request_start_; }
  boost::asio::any_io_executor executor();

  // From the exchange, posted to the I/O thread.
  void send(std::string bytes, bool from_exchange);
  void exchange_done(bool keep_alive);
  void write_timed_out();

  // The server's lists of idle connections and of headers being read (oldest first).
  std::list<HttpConnection*>::iterator idle_position;
  bool in_idle_list = false;
  std::list<HttpConnection*>::iterator header_position;
  bool in_header_list = false;

 private:
  enum class Phase {
    kWaiting,   // for a request's first byte
    kHeader,    // reading the header
    kBody,      // reading the body
    kHandling,  // a worker answers, or an answer is being written; the next request waits
    kClosing,   // the last answer goes out, then what the client still sends is dropped
    kClosed,
  };
  struct Outgoing {
    std::string bytes;
    bool from_exchange;  // counts against the exchange's unsent bytes
  };

  void set_phase(Phase phase);
  void begin_request();
  void read();
  void keep_read(std::size_t n);  // moves what a read got into buffer_
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void parse();
  void on_header();
  // A chunked body holds more than it reserved: reserve more, false when the budget is spent.
  bool grow_body_reservation();
  void refuse_for_body_budget();
  void dispatch();
  void on_end_of_input();
  void watch_for_reset();
  // After a FIN, before any of the answer: one byte of TCP urgent data,
  // which a client that closed answers with a reset and one that only
  // half-closed keeps out of its stream (normal reads skip it).
  void probe_with_urgent_byte();
  void answer(HttpResponse response, bool keep_alive);
  void refuse_request(int status, const std::string& message, const HttpFields& fields, bool keep_alive);
  void write_next();
  void after_response();
  void graceful_close();
  void client_gone();
  void set_deadline(std::chrono::milliseconds after, Phase phase);
  void cancel_deadline();
  void on_deadline(Phase phase);
  void log_access();
  void set_busy(bool is_busy);

  boost::asio::ip::tcp::socket socket_;
  std::string client_;
  ConnectionHost& host_;
  const HttpServerOptions& options_;
  boost::beast::flat_buffer buffer_;  // bounded: a header line must fit
  // What a read in flight fills. Never buffer_'s own storage: parse() consumes
  // from buffer_ while a read is in flight, and a consume that empties it moves
  // where its next bytes go, so a read into it would commit stale bytes.
  std::vector<char> read_chunk_;
  std::optional<RequestParser> parser_;
  boost::asio::steady_timer deadline_;
  std::uint64_t deadline_generation_ = 0;  // a timer that fires after a newer one was set does nothing
  Phase phase_ = Phase::kWaiting;
  bool reading_ = false;
  bool read_closed_ = false;  // the client's FIN came
  bool writing_ = false;
  bool shut_down_ = false;
  bool closed_ = false;
  bool keep_alive_ = false;
  bool answer_done_ = false;       // the whole answer is queued
  bool response_started_ = false;  // some of it was
  bool watching_reset_ = false;  // an error wait is outstanding (after the FIN)
  bool urgent_probed_ = false;   // the one urgent byte of this connection is sent
  bool gone_ = false;
  bool logged_ = false;
  bool refused_on_arrival_ = false;
  bool busy_ = false;
  std::size_t lingered_bytes_ = 0;
  std::deque<Outgoing> out_;
  std::vector<std::string> in_flight_;  // the buffers of the write under way
  std::uint64_t body_reserved_ = 0;     // this request's share of max_pending_body_bytes
  std::shared_ptr<ExchangeState> exchange_;
  std::chrono::steady_clock::time_point request_start_{};
  std::chrono::steady_clock::time_point idle_since_{};
  std::string method_ = "-";
  std::string target_;
  int status_ = 0;
  int version_ = 11;
};

}  // namespace folio::server
