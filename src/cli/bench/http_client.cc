#include "cli/bench/http_client.h"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace folio::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

// Runs one asynchronous step to its end: the stream's expiry bounds it.
template <class Start>
error_code run_step(asio::io_context& io, Start&& start) {
  error_code result = asio::error::would_block;
  start([&result](const error_code& ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

}  // namespace

HttpResult http_exchange(const std::string& url, const std::string& method, const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body,
                         double timeout_s, const std::function<void(int status, std::string_view bytes)>& on_body) {
  HttpResult result;
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    result.error = fmt::format("{} is not an http:// URL", url);
    return result;
  }
  std::string authority = url.substr(scheme.size());
  while (!authority.empty() && authority.back() == '/') authority.pop_back();
  if (authority.find('/') != std::string::npos) {
    result.error = fmt::format("give the server's URL without a path: {}", url);
    return result;
  }
  const std::size_t colon = authority.rfind(':');
  const std::string host = colon == std::string::npos ? authority : authority.substr(0, colon);
  const std::string port = colon == std::string::npos ? "80" : authority.substr(colon + 1);

  asio::io_context io;
  beast::tcp_stream stream(io);
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  auto fail = [&](const char* what, const error_code& ec) {
    result.error = fmt::format("{} {}: {}", what, url, ec == beast::error::timeout ? "timed out" : ec.message());
    return result;
  };
  error_code ec;
  const auto endpoints = asio::ip::tcp::resolver(io).resolve(host, port, ec);
  if (ec) return fail("cannot resolve", ec);
  stream.expires_at(deadline);
  if ((ec = run_step(io, [&](auto handler) { stream.async_connect(endpoints, handler); })))
    return fail("cannot reach", ec);

  http::request<http::string_body> req{method == "POST" ? http::verb::post : http::verb::get, path, 11};
  req.set(http::field::host, authority);
  for (const auto& [name, value] : headers) req.set(name, value);
  if (!body.empty() || method == "POST") {
    req.body() = body;
    req.prepare_payload();
  }
  if ((ec = run_step(io, [&](auto handler) { http::async_write(stream, req, handler); })))
    return fail("cannot send to", ec);

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  if ((ec = run_step(io, [&](auto handler) { http::async_read_header(stream, buffer, parser, handler); })))
    return fail("no response from", ec);
  result.status = parser.get().result_int();
  while (!parser.is_done()) {
    ec = run_step(io, [&](auto handler) { http::async_read_some(stream, buffer, parser, handler); });
    std::string& got = parser.get().body();
    if (!got.empty()) {
      on_body(result.status, got);
      got.clear();
    }
    if (ec) return fail("the response was cut short by", ec);
  }
  std::string& rest = parser.get().body();
  if (!rest.empty()) on_body(result.status, rest);
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  return result;
}

}  // namespace folio::cli
