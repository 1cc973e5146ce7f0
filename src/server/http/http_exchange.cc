#include "server/http/http_exchange.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <ctime>

namespace folio::server {
namespace asio = boost::asio;

namespace {

std::string http_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[64];
  const std::size_t n = std::strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(text, n);
}

}  // namespace

std::string response_head(int status, const std::string& content_type, const HttpFields& fields,
                          const std::string& framing, bool keep_alive, int version) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nDate: {}\r\n", status, reason_phrase(status), http_date());
  if (!content_type.empty()) out += fmt::format("Content-Type: {}\r\n", content_type);
  for (const auto& [name, value] : fields) out += fmt::format("{}: {}\r\n", name, value);
  out += framing;
  if (!keep_alive) {
    out += "Connection: close\r\n";
  } else if (version == 10) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  return out;
}

std::string chunk(std::string_view bytes) { return fmt::format("{:x}\r\n{}\r\n", bytes.size(), bytes); }

ConnectionExchange::ConnectionExchange(std::shared_ptr<HttpConnection> connection, std::shared_ptr<ExchangeState> state,
                                       ConnectionHost& host, std::uint64_t body_bytes, int version, bool keep_alive,
                                       bool head_only)
    : connection_(std::move(connection)),
      state_(std::move(state)),
      host_(host),
      body_bytes_(body_bytes),
      version_(version),
      keep_alive_(keep_alive),
      head_only_(head_only) {}

void ConnectionExchange::respond(HttpResponse r) {
  if (answered_) return;
  answered_ = true;
  std::string bytes = response_head(r.status, r.content_type, r.fields,
                                    fmt::format("Content-Length: {}\r\n", r.body.size()), keep_alive_, version_);
  if (!head_only_) bytes += r.body;
  {
    std::lock_guard lock(state_->mutex);
    state_->status = r.status;
  }
  post(std::move(bytes));
}

void ConnectionExchange::begin_stream(int status, const std::string& content_type, const HttpFields& fields) {
  if (answered_) return;
  answered_ = streaming_ = true;
  // HTTP/1.0 has no chunked framing: the stream ends when the connection does.
  chunked_ = version_ == 11;
  if (!chunked_) keep_alive_ = false;
  std::string bytes = response_head(status, content_type, fields, chunked_ ? "Transfer-Encoding: chunked\r\n" : "",
                                    keep_alive_, version_);
  {
    std::lock_guard lock(state_->mutex);
    state_->status = status;
  }
  post(std::move(bytes));
}

bool ConnectionExchange::write(std::string bytes) {
  if (!streaming_ || ended_) return false;
  if (bytes.empty()) return !client_gone();  // an empty chunk would end the stream
  const auto limit = host_.options().max_unsent_bytes;
  {
    std::unique_lock lock(state_->mutex);
    const bool room = state_->drained.wait_for(lock, host_.options().write_timeout,
                                               [&] { return state_->gone || state_->unsent <= limit; });
    if (state_->gone) return false;
    if (!room) {
      // A client that reads nothing for the whole write timeout is gone too.
      lock.unlock();
      asio::post(connection_->executor(), [c = connection_] { c->write_timed_out(); });
      return false;
    }
  }
  post(chunked_ ? chunk(bytes) : std::move(bytes));
  return true;
}

void ConnectionExchange::end_stream() {
  if (!streaming_ || ended_) return;
  ended_ = true;
  if (chunked_) post("0\r\n\r\n");
}

bool ConnectionExchange::client_gone() const {
  std::lock_guard lock(state_->mutex);
  return state_->gone;
}

void ConnectionExchange::on_gone(std::function<void()> callback) {
  std::unique_lock lock(state_->mutex);
  if (state_->gone) {
    lock.unlock();
    if (callback) callback();
    return;
  }
  state_->on_gone = std::move(callback);
}

void ConnectionExchange::release_body() {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->body_released) return;
    state_->body_released = true;
  }
  host_.release_body(body_bytes_);
}

void ConnectionExchange::note(std::string text) {
  std::lock_guard lock(state_->mutex);
  state_->note = std::move(text);
}

void ConnectionExchange::finish(const std::string& error_body) {
  if (!answered_) {
    HttpResponse r;
    r.status = 500;
    r.body = error_body;
    respond(std::move(r));
  }
  end_stream();
  release_body();
  {
    std::lock_guard lock(state_->mutex);
    state_->on_gone = nullptr;  // whatever it captured goes now, not with the connection
  }
  asio::post(connection_->executor(), [c = connection_, keep = keep_alive_] { c->exchange_done(keep); });
}

void ConnectionExchange::post(std::string bytes) {
  {
    std::lock_guard lock(state_->mutex);
    state_->unsent += bytes.size();
  }
  asio::post(connection_->executor(),
             [c = connection_, b = std::move(bytes)]() mutable { c->send(std::move(b), true); });
}

}  // namespace folio::server
