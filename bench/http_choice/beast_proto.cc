// The Boost.Beast candidate of the HTTP-layer choice (bench/RESULTS.md, "HTTP
// layer"): Beast's stock request_parser over Asio on one I/O thread, with the
// limits a server would set (16 KiB header, 1 MiB body, 10 s per request);
// GET /json answers a small JSON body, GET /sse?n=N&ms=M streams N events
// M ms apart, each stamped with the time it was made. Run by run.sh.
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct Conn : std::enable_shared_from_this<Conn> {
  tcp::socket sock;
  beast::flat_buffer buf{64 * 1024};
  std::unique_ptr<http::request_parser<http::string_body>> parser;
  asio::steady_timer deadline, tick;
  std::string out;
  int left = 0, ms = 0;
  explicit Conn(tcp::socket s) : sock(std::move(s)), deadline(sock.get_executor()), tick(sock.get_executor()) {}
  void start() { read(); }
  void read() {
    parser = std::make_unique<http::request_parser<http::string_body>>();
    parser->header_limit(16 * 1024);
    parser->body_limit(1 << 20);
    deadline.expires_after(std::chrono::seconds(10));
    auto self = shared_from_this();
    deadline.async_wait([self](beast::error_code ec) {
      if (!ec) self->sock.close();
    });
    http::async_read(sock, buf, *parser, [self](beast::error_code ec, std::size_t) {
      self->deadline.cancel();
      if (ec) {
        if (ec != http::error::end_of_stream)
          self->fail(400);
        else
          self->sock.close();
        return;
      }
      self->handle();
    });
  }
  void fail(int status) {
    auto self = shared_from_this();
    out = "HTTP/1.1 " + std::to_string(status) + " Bad\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    asio::async_write(sock, asio::buffer(out), [self](beast::error_code, std::size_t) { self->sock.close(); });
  }
  void handle() {
    auto& req = parser->get();
    std::string target(req.target());
    auto self = shared_from_this();
    if (target.rfind("/sse", 0) == 0) {
      left = 100;
      ms = 10;
      std::sscanf(target.c_str(), "/sse?n=%d&ms=%d", &left, &ms);
      out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
      asio::async_write(sock, asio::buffer(out), [self](beast::error_code ec, std::size_t) {
        if (!ec) self->next_event();
      });
      return;
    }
    static const std::string body = R"({"object":"list","data":[{"id":"m","object":"model"}]})";
    out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n\r\n" + body;
    bool keep = req.keep_alive();
    asio::async_write(sock, asio::buffer(out), [self, keep](beast::error_code ec, std::size_t) {
      if (!ec && keep)
        self->read();
      else {
        self->sock.shutdown(tcp::socket::shutdown_send, ec);
        self->sock.close();
      }
    });
  }
  void next_event() {
    auto self = shared_from_this();
    if (left == 0) {
      out = "0\r\n\r\n";
      asio::async_write(sock, asio::buffer(out), [self](beast::error_code ec, std::size_t) {
        if (!ec) self->read();
      });
      return;
    }
    tick.expires_after(std::chrono::milliseconds(ms));
    tick.async_wait([self](beast::error_code) {
      --self->left;
      char ev[128];
      auto now =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      int n = std::snprintf(ev, sizeof ev, "data: {\"t\": %lld}\n\n", (long long)now);
      char head[16];
      int h = std::snprintf(head, sizeof head, "%x\r\n", n);
      self->out = std::string(head, h) + std::string(ev, n) + "\r\n";
      asio::async_write(self->sock, asio::buffer(self->out), [self](beast::error_code ec, std::size_t) {
        if (!ec) self->next_event();
      });
    });
  }
};

void accept(tcp::acceptor& a) {
  a.async_accept([&a](beast::error_code ec, tcp::socket s) {
    if (!ec) {
      s.set_option(tcp::no_delay(true));
      std::make_shared<Conn>(std::move(s))->start();
    }
    accept(a);
  });
}

int main(int argc, char** argv) {
  asio::io_context io(1);
  tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), std::atoi(argv[1])), true);
  a.listen(4096);
  accept(a);
  io.run();
}
