#include "server/http/http_server.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <list>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "server/http/http_connection.h"
#include "server/http/worker_pool.h"

namespace folio::server {
namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

// A full server makes room for a newcomer by closing the longest-idle
// keep-alive connection, else the header that has been arriving longest:
// a header sent whole arrives with the connection or a round trip later, so
// one still arriving is a slow (or slowloris) client, and trickling headers
// would otherwise keep every client of their address out (a liveness probe
// that times out restarts the pod) until the header timeout. Neither is
// closed younger than this: a connection just accepted may not have
// delivered its request yet, and a slowloris that reconnects in bursts
// would otherwise close the probe that came between its connections. A
// client's request follows its handshake within a round trip, so 20 ms is
// ample; longer, and a slowloris whose connections all time out and
// reconnect at once holds every place young enough to keep a probe out for
// as long (seen as a 503 to /health under load with 100 ms).
constexpr auto kMinAgeToClose = std::chrono::milliseconds(20);

}  // namespace

class HttpServer::Impl final : public ConnectionHost {
 public:
  Impl(const HttpServerOptions& options, HttpHandler& handler)
      : options_(options),
        handler_(handler),
        acceptor_(io_),
        retry_accept_(io_),
        workers_(std::in_place, options.max_workers) {}

  ~Impl() override { stop(); }

  int start() {
    error_code ec;
    const auto address = asio::ip::make_address(options_.host, ec);
    if (ec) fail("cannot listen on {}: not an IP address; give --host an address such as 127.0.0.1", options_.host);
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
    acceptor_.open(endpoint.protocol(), ec);
    // SO_REUSEADDR only: SO_REUSEPORT would let a second server bind the port
    // and silently take half the connections.
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(options_.backlog, ec);
    if (ec)
      fail(
          "cannot listen on {}:{} ({}); is another server using the port? Choose another with --port, or the "
          "address with --host",
          options_.host, options_.port, ec.message());
    const int port = acceptor_.local_endpoint().port();
    accept();
    thread_ = std::thread([this] { io_.run(); });
    return port;
  }

  void stop() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      stopping_ = true;
      error_code ec;
      acceptor_.close(ec);
      retry_accept_.cancel();
      std::vector<std::shared_ptr<HttpConnection>> all;
      for (auto& [raw, c] : connections_) all.push_back(c);
      for (auto& c : all) c->close();  // running exchanges see their client gone
    });
    // Handlers finish (their clients are gone), posting their last words to
    // the I/O thread, which runs until the last of them.
    workers_.reset();
    asio::post(io_, [this] {
      for (auto& [raw, c] : std::unordered_map(connections_)) c->close();
    });
    thread_.join();
  }

  Stats stats() const {
    Stats s;
    s.num_connections = num_open_.load();
    s.num_idle_connections = num_idle_.load();
    s.num_refused_connections = num_refused_.load();
    s.num_evicted_idle = num_evicted_.load();
    s.num_slow_headers_closed = num_slow_headers_closed_.load();
    s.pending_body_bytes = pending_body_bytes_.load();
    s.num_workers = num_workers_.load();
    return s;
  }

  // ConnectionHost
  const HttpServerOptions& options() const override { return options_; }
  HttpHandler& handler() override { return handler_; }
  bool stopping() const override { return stopping_; }

  void run_on_worker(std::function<void()> job) override {
    if (!workers_) return;
    workers_->post(std::move(job));
    num_workers_ = workers_->num_threads();
  }

  bool reserve_body(std::uint64_t bytes) override {
    std::uint64_t now = pending_body_bytes_.load();
    do {
      if (now + bytes > options_.max_pending_body_bytes) return false;
    } while (!pending_body_bytes_.compare_exchange_weak(now, now + bytes));
    return true;
  }

  void release_body(std::uint64_t bytes) override { pending_body_bytes_ -= bytes; }

  void busy(bool is_busy) override {
    if (is_busy) {
      ++num_busy_;
    } else {
      --num_busy_;
    }
  }

  bool wait_until_quiet(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (num_busy_ > 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  void idle(HttpConnection& c, bool is_idle) override {
    if (is_idle && !c.in_idle_list) {
      c.idle_position = idle_.insert(idle_.end(), &c);
      c.in_idle_list = true;
    } else if (!is_idle && c.in_idle_list) {
      idle_.erase(c.idle_position);
      c.in_idle_list = false;
    }
    num_idle_ = static_cast<int>(idle_.size());
  }

  void reading_header(HttpConnection& c, bool is_reading) override {
    if (is_reading && !c.in_header_list) {
      c.header_position = headers_.insert(headers_.end(), &c);
      c.in_header_list = true;
    } else if (!is_reading && c.in_header_list) {
      headers_.erase(c.header_position);
      c.in_header_list = false;
    }
  }

  void closed(HttpConnection& c) override {
    auto it = connections_.find(&c);
    if (it == connections_.end()) return;
    if (counted_.erase(&c) > 0) {
      --num_open_;
      auto client = clients_.find(c.client());
      if (client != clients_.end() && --client->second == 0) clients_.erase(client);
    }
    connections_.erase(it);
  }

 private:
  void accept() {
    acceptor_.async_accept([this](const error_code& ec, tcp::socket socket) {
      if (stopping_) return;
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
        // Out of descriptors (EMFILE) or the like: pause rather than spin.
        retry_accept_.expires_after(std::chrono::milliseconds(50));
        retry_accept_.async_wait([this](const error_code& e) {
          if (!e && !stopping_) accept();
        });
        return;
      }
      admit(std::move(socket));
      accept();
    });
  }

  void admit(tcp::socket socket) {
    error_code ec;
    socket.set_option(tcp::no_delay(true), ec);  // SSE events are small and should leave at once
    auto peer = socket.remote_endpoint(ec);
    if (ec) return;  // gone already
    auto address = peer.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped())
      address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
    const std::string client = address.to_string();
    auto connection = std::make_shared<HttpConnection>(std::move(socket), client, *this);
    connections_.emplace(connection.get(), connection);

    // Room is made by closing the longest-idle keep-alive connection (of this
    // client, for the per-client bound), else the oldest slow header; with
    // neither, the newcomer is refused.
    if (num_open_ >= options_.max_connections && !evict_idle(nullptr) && !evict_slow_header(nullptr)) {
      return refuse(connection, 503,
                    fmt::format("the server has {} connections open, its limit; retry in a moment "
                                "(the bound is --max-connections)",
                                options_.max_connections));
    }
    const int from_client = clients_.count(client) ? clients_[client] : 0;
    if (from_client >= options_.max_connections_per_client && !evict_idle(&client) && !evict_slow_header(&client)) {
      return refuse(connection, 429,
                    fmt::format("this client has {} connections open, the limit per client; close "
                                "some, or reuse them (the bound is --max-connections-per-client)",
                                options_.max_connections_per_client));
    }
    ++clients_[client];
    ++num_open_;
    counted_.insert(connection.get());
    connection->start();
  }

  void refuse(const std::shared_ptr<HttpConnection>& connection, int status, const std::string& message) {
    ++num_refused_;
    // Refusals linger a moment to be read; a flood of them is just closed.
    if (connections_.size() > 2 * static_cast<std::size_t>(options_.max_connections)) {
      connection->close();
      return;
    }
    connection->refuse(status, message, {{"Retry-After", "1"}});
  }

  bool evict_idle(const std::string* client) {
    const auto now = std::chrono::steady_clock::now();
    for (HttpConnection* c : idle_) {
      if (now - c->idle_since() < kMinAgeToClose) return false;  // the rest are younger
      if (client != nullptr && c->client() != *client) continue;
      ++num_evicted_;
      c->close();
      return true;
    }
    return false;
  }

  bool evict_slow_header(const std::string* client) {
    const auto now = std::chrono::steady_clock::now();
    for (HttpConnection* c : headers_) {
      if (now - c->header_since() < kMinAgeToClose) return false;  // the rest are younger
      if (client != nullptr && c->client() != *client) continue;
      ++num_slow_headers_closed_;
      c->close();
      return true;
    }
    return false;
  }

  const HttpServerOptions& options_;
  HttpHandler& handler_;
  asio::io_context io_{1};
  tcp::acceptor acceptor_;
  asio::steady_timer retry_accept_;
  std::thread thread_;
  std::optional<WorkerPool> workers_;
  bool stopping_ = false;

  // I/O thread only.
  std::unordered_map<HttpConnection*, std::shared_ptr<HttpConnection>> connections_;
  std::unordered_set<HttpConnection*> counted_;   // those that count against the limits
  std::unordered_map<std::string, int> clients_;  // address -> counted connections
  std::list<HttpConnection*> idle_;               // oldest first
  std::list<HttpConnection*> headers_;            // reading a header, oldest first

  std::atomic<int> num_open_{0};
  std::atomic<int> num_idle_{0};
  std::atomic<int> num_workers_{0};
  std::atomic<int> num_busy_{0};
  std::atomic<std::int64_t> num_refused_{0};
  std::atomic<std::int64_t> num_evicted_{0};
  std::atomic<std::int64_t> num_slow_headers_closed_{0};
  std::atomic<std::uint64_t> pending_body_bytes_{0};
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler& handler)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(options_, handler)) {}

HttpServer::~HttpServer() = default;

int HttpServer::start() { return impl_->start(); }

void HttpServer::stop() { impl_->stop(); }

bool HttpServer::wait_until_quiet(std::chrono::milliseconds timeout) const { return impl_->wait_until_quiet(timeout); }

HttpServer::Stats HttpServer::stats() const { return impl_->stats(); }

}  // namespace folio::server
