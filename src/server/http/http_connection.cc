#include "server/http/http_connection.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/write.hpp>
#include <mutex>

#include "server/http/http_exchange.h"

namespace folio::server {
namespace asio = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kReadChunkBytes = 16 << 10;
constexpr std::size_t kIdleReadBytes = 4 << 10;
constexpr std::uint64_t kChunkedReserveBytes = 64 << 10;  // a chunked body's first share of the body budget
constexpr std::size_t kLingerBytes = 1 << 20;  // a refused body read and dropped, at most
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

HttpConnection::HttpConnection(asio::ip::tcp::socket socket, std::string client, ConnectionHost& host)
    : socket_(std::move(socket)),
      client_(std::move(client)),
      host_(host),
      options_(host.options()),
      buffer_(std::max<std::size_t>(options_.limits.max_header_bytes + 4096, 64 << 10)),
      deadline_(socket_.get_executor()) {}

HttpConnection::~HttpConnection() = default;

asio::any_io_executor HttpConnection::executor() { return socket_.get_executor(); }

void HttpConnection::start() { begin_request(); }

void HttpConnection::refuse(int status, const std::string& message, const HttpFields& fields) {
  refused_on_arrival_ = true;
  refuse_request(status, message, fields, /*keep_alive=*/false);
}

void HttpConnection::set_phase(Phase phase) {
  if ((phase_ == Phase::kHeader) != (phase == Phase::kHeader)) host_.reading_header(*this, phase == Phase::kHeader);
  phase_ = phase;
}

void HttpConnection::begin_request() {
  parser_.emplace(options_.limits);
  exchange_.reset();
  answer_done_ = false;
  response_started_ = false;
  gone_ = false;
  logged_ = false;
  request_start_ = {};
  body_reserved_ = 0;
  status_ = 0;
  method_ = "-";
  target_.clear();
  if (read_closed_ && buffer_.size() == 0) {
    graceful_close();
    return;
  }
  if (buffer_.size() > 0) {  // a pipelined request is already here
    request_start_ = Clock::now();
    set_phase(Phase::kHeader);
    set_deadline(options_.header_timeout, Phase::kHeader);
    parse();
    return;
  }
  set_phase(Phase::kWaiting);
  idle_since_ = Clock::now();
  host_.idle(*this, true);
  set_deadline(options_.keep_alive_timeout, Phase::kWaiting);
  read();
}

void HttpConnection::read() {
  if (reading_ || closed_ || read_closed_) return;
  const std::size_t room = buffer_.max_size() - buffer_.size();
  if (room == 0) {
    if (phase_ == Phase::kHeader || phase_ == Phase::kBody) {
      parser_->buffer_full();
      parse();
    }
    return;  // handling: the next request waits in the buffer
  }
  reading_ = true;
  // Small reads while waiting, so that an idle connection holds little memory.
  const std::size_t chunk = phase_ == Phase::kBody ? kReadChunkBytes : kIdleReadBytes;
  if (chunk < read_chunk_.capacity()) std::vector<char>().swap(read_chunk_);
  read_chunk_.resize(std::min(room, chunk));
  socket_.async_read_some(asio::buffer(read_chunk_),
                          [self = shared_from_this()](const error_code& ec, std::size_t n) { self->on_read(ec, n); });
}

void HttpConnection::keep_read(std::size_t n) {
  // n fits: buffer_ only shrank since read() measured its room.
  asio::buffer_copy(buffer_.prepare(n), asio::buffer(read_chunk_.data(), n));
  buffer_.commit(n);
}

void HttpConnection::on_read(const error_code& ec, std::size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec == asio::error::eof) {
    read_closed_ = true;
    on_end_of_input();
    return;
  }
  if (ec) {  // a reset, or the socket closed under us
    close();
    return;
  }
  switch (phase_) {
    case Phase::kWaiting:
      keep_read(n);
      host_.idle(*this, false);
      request_start_ = Clock::now();
      set_phase(Phase::kHeader);
      set_deadline(options_.header_timeout, Phase::kHeader);
      parse();
      break;
    case Phase::kHeader:
    case Phase::kBody:
      keep_read(n);
      parse();
      break;
    case Phase::kHandling:
      keep_read(n);  // the next request, pipelined: it waits
      read();
      break;
    case Phase::kClosing:
      lingered_bytes_ += n;  // the rest of a refused request: dropped
      if (lingered_bytes_ > kLingerBytes) {
        close();
      } else {
        read();
      }
      break;
    case Phase::kClosed:
      break;
  }
}

void HttpConnection::parse() {
  const auto data = buffer_.data();
  const std::size_t used = parser_->feed(std::string_view(static_cast<const char*>(data.data()), data.size()));
  buffer_.consume(used);
  if (phase_ == Phase::kBody && parser_->chunked() && parser_->state() != RequestParser::State::kRefused &&
      !grow_body_reservation())
    return refuse_for_body_budget();
  switch (parser_->state()) {
    case RequestParser::State::kNeedMore:
      if (read_closed_) {
        on_end_of_input();  // the rest of this request will never come
      } else {
        read();
      }
      break;
    case RequestParser::State::kHeaderDone:
      on_header();
      break;
    case RequestParser::State::kComplete:
      dispatch();
      break;
    case RequestParser::State::kRefused: {
      const HttpRefusal& r = parser_->refusal();
      refuse_request(r.status, r.message, {}, /*keep_alive=*/false);
      break;
    }
  }
}

void HttpConnection::on_header() {
  const HttpRequest& head = parser_->request();
  method_ = head.method;
  target_ = head.target;
  version_ = head.version;
  const bool has_body = parser_->content_length().value_or(0) > 0 || parser_->chunked();
  HttpRequest screened = head;
  screened.client = client_;
  if (std::optional<HttpResponse> refusal = host_.handler().screen(screened)) {
    // Without a body to skip, the connection can serve the next request.
    answer(std::move(*refusal), /*keep_alive=*/!has_body && parser_->keep_alive());
    return;
  }
  // A chunked body of unknown size reserves as it grows (grow_body_reservation).
  const std::uint64_t want = parser_->chunked()
                                 ? std::min<std::uint64_t>(kChunkedReserveBytes, options_.limits.max_body_bytes)
                                 : parser_->content_length().value_or(0);
  if (want > 0) {
    if (!host_.reserve_body(want)) return refuse_for_body_budget();
    body_reserved_ = want;
    if (parser_->expects_continue()) send(std::string(kContinue), false);
    set_phase(Phase::kBody);
    set_deadline(options_.body_timeout, Phase::kBody);
  }
  parser_->resume_body();
  parse();
}

void HttpConnection::refuse_for_body_budget() {
  refuse_request(503,
                 "the server is reading as many request bodies as it may hold at once; retry in a moment (the bound "
                 "is --max-pending-body-bytes)",
                 {{"Retry-After", "1"}}, /*keep_alive=*/false);
}

bool HttpConnection::grow_body_reservation() {
  const std::uint64_t held = parser_->request().body.size();
  if (held <= body_reserved_) return true;
  const std::uint64_t want =
      std::min<std::uint64_t>(std::max(2 * body_reserved_, held), options_.limits.max_body_bytes);
  if (!host_.reserve_body(want - body_reserved_)) return false;
  body_reserved_ = want;
  return true;
}

void HttpConnection::dispatch() {
  cancel_deadline();
  set_phase(Phase::kHandling);
  set_busy(true);
  keep_alive_ = parser_->keep_alive();
  auto request = std::make_shared<HttpRequest>(parser_->take_request());
  request->client = client_;
  exchange_ = std::make_shared<ExchangeState>();
  auto exchange = std::make_shared<ConnectionExchange>(shared_from_this(), exchange_, host_, body_reserved_, version_,
                                                       keep_alive_, request->method == "HEAD");
  body_reserved_ = 0;  // the exchange releases it
  HttpHandler& handler = host_.handler();
  host_.run_on_worker([exchange, request, &handler] {
    std::string error;
    try {
      handler.handle(std::move(*request), *exchange);
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown error";
    }
    exchange->finish(handler.error_body(
        500, error.empty() ? "internal error: the handler gave no answer" : "internal error: " + error));
  });
  read();  // watches for a reset, a half-close, or the next request
}

void HttpConnection::on_end_of_input() {
  switch (phase_) {
    case Phase::kWaiting:
      close();
      break;  // a clean end between requests
    case Phase::kHeader:
    case Phase::kBody:
      parser_->end_of_input();
      if (parser_->state() == RequestParser::State::kRefused) {
        refuse_request(parser_->refusal().status, parser_->refusal().message, {}, false);
      } else {
        close();
      }
      break;
    case Phase::kHandling:
      // A half-close: the client may still read, so the answer goes on. A
      // client that closed instead answers the next write with a reset; an
      // answer not yet begun (a non-streaming one) is probed for it.
      watch_for_reset();
      if (!response_started_) probe_with_urgent_byte();
      break;
    case Phase::kClosing:
    case Phase::kClosed:
      close();
      break;
  }
}

void HttpConnection::probe_with_urgent_byte() {
  // Once a connection: a second urgent byte unread by the client would push
  // the first into its normal stream (before the answer's status line).
  if (urgent_probed_ || closed_) return;
  urgent_probed_ = true;
  const char byte = 0;
  // Non-blocking: the answer has not begun, so nothing else is queued to
  // write and one byte always fits. A failure means the peer is gone already.
  if (::send(socket_.native_handle(), &byte, 1, MSG_OOB | MSG_NOSIGNAL | MSG_DONTWAIT) < 0) close();
}

void HttpConnection::watch_for_reset() {
  if (watching_reset_ || closed_) return;
  // The reset may already be here (it came while no read was outstanding);
  // one that comes later is reported to the wait below, on this thread.
  pollfd p{socket_.native_handle(), 0, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & POLLERR) != 0) {
    close();
    return;
  }
  watching_reset_ = true;
  socket_.async_wait(asio::ip::tcp::socket::wait_error, [self = shared_from_this()](const error_code& ec) {
    self->watching_reset_ = false;
    if (ec || self->closed_) return;
    pollfd q{self->socket_.native_handle(), 0, 0};
    if (::poll(&q, 1, 0) > 0 && (q.revents & (POLLERR | POLLHUP)) != 0) {
      self->close();  // reset: nobody reads
    } else {
      self->watch_for_reset();  // urgent data, not an error
    }
  });
}

void HttpConnection::answer(HttpResponse response, bool keep_alive) {
  cancel_deadline();
  set_phase(Phase::kHandling);
  keep_alive_ = keep_alive;
  status_ = response.status;
  std::string bytes = response_head(response.status, response.content_type, response.fields,
                                    fmt::format("Content-Length: {}\r\n", response.body.size()), keep_alive, version_);
  if (method_ != "HEAD") bytes += response.body;
  if (!keep_alive) set_phase(Phase::kClosing);  // what the client still sends is dropped
  set_deadline(options_.write_timeout, phase_);
  answer_done_ = true;
  send(std::move(bytes), false);
}

void HttpConnection::refuse_request(int status, const std::string& message, const HttpFields& fields, bool keep_alive) {
  if (closed_) return;
  if (request_start_ == Clock::time_point{}) request_start_ = Clock::now();
  HttpResponse r;
  r.status = status;
  r.body = host_.handler().error_body(status, message);
  r.fields = fields;
  answer(std::move(r), keep_alive);
}

void HttpConnection::send(std::string bytes, bool from_exchange) {
  if (closed_) return;
  if (from_exchange) response_started_ = true;
  out_.push_back({std::move(bytes), from_exchange});
  write_next();
}

void HttpConnection::write_next() {
  if (writing_ || closed_) return;
  if (out_.empty()) {
    if (phase_ == Phase::kHandling) cancel_deadline();
    if (answer_done_ && phase_ == Phase::kHandling) {
      after_response();
    } else if (answer_done_ && phase_ == Phase::kClosing && !shut_down_) {
      log_access();
      graceful_close();
    }
    return;
  }
  in_flight_.clear();
  std::vector<asio::const_buffer> buffers;
  std::size_t counted = 0;
  while (!out_.empty()) {
    if (out_.front().from_exchange) counted += out_.front().bytes.size();
    in_flight_.push_back(std::move(out_.front().bytes));
    out_.pop_front();
  }
  for (const std::string& b : in_flight_) buffers.emplace_back(b.data(), b.size());
  writing_ = true;
  if (phase_ == Phase::kHandling) set_deadline(options_.write_timeout, Phase::kHandling);
  asio::async_write(socket_, buffers, [self = shared_from_this(), counted](const error_code& ec, std::size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    if (ec) {
      self->close();  // a failed write: the client is gone
      return;
    }
    if (self->exchange_ && counted > 0) {
      {
        std::lock_guard lock(self->exchange_->mutex);
        self->exchange_->unsent -= std::min(counted, self->exchange_->unsent);
      }
      self->exchange_->drained.notify_all();
    }
    self->write_next();
  });
}

void HttpConnection::exchange_done(bool keep_alive) {
  if (closed_) {
    log_access();
    return;
  }
  keep_alive_ = keep_alive_ && keep_alive;
  answer_done_ = true;
  write_next();
}

void HttpConnection::after_response() {
  log_access();
  set_busy(false);
  // After a FIN, requests already sent (pipelined) are still answered.
  if (keep_alive_ && (!read_closed_ || buffer_.size() > 0) && !host_.stopping()) {
    begin_request();
  } else {
    graceful_close();
  }
}

void HttpConnection::graceful_close() {
  set_phase(Phase::kClosing);
  if (writing_ || !out_.empty()) return;  // write_next comes back here once the answer is out
  shut_down_ = true;
  error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  if (ec || read_closed_) {
    close();
    return;
  }
  // Read and drop what the client still sends for a moment, so that closing
  // with unread bytes does not reset the connection before it reads the answer.
  set_deadline(std::chrono::duration_cast<std::chrono::milliseconds>(kLingerTime), Phase::kClosing);
  read();
}

void HttpConnection::close() {
  if (closed_) return;
  auto self = shared_from_this();  // the server's registry may hold the last reference
  closed_ = true;
  if (exchange_) client_gone();
  set_phase(Phase::kClosed);
  error_code ec;
  socket_.close(ec);
  deadline_.cancel();
  if (body_reserved_ > 0) host_.release_body(body_reserved_);
  body_reserved_ = 0;
  host_.idle(*this, false);
  if (!exchange_ || answer_done_) log_access();
  set_busy(false);
  host_.closed(*this);
}

void HttpConnection::client_gone() {
  std::function<void()> callback;
  {
    std::lock_guard lock(exchange_->mutex);
    if (exchange_->gone) return;
    exchange_->gone = true;
    callback = std::move(exchange_->on_gone);
    exchange_->on_gone = nullptr;
  }
  exchange_->drained.notify_all();
  gone_ = true;
  if (callback) callback();
}

void HttpConnection::write_timed_out() {
  if (exchange_) client_gone();
  close();
}

void HttpConnection::set_busy(bool is_busy) {
  if (busy_ == is_busy) return;
  busy_ = is_busy;
  host_.busy(is_busy);
}

void HttpConnection::set_deadline(std::chrono::milliseconds after, Phase phase) {
  const std::uint64_t generation = ++deadline_generation_;
  deadline_.expires_after(after);
  deadline_.async_wait([self = shared_from_this(), generation, phase](const error_code& ec) {
    if (ec || generation != self->deadline_generation_ || self->closed_) return;
    self->on_deadline(phase);
  });
}

void HttpConnection::cancel_deadline() {
  ++deadline_generation_;
  deadline_.cancel();
}

void HttpConnection::on_deadline(Phase phase) {
  switch (phase) {
    case Phase::kWaiting:
      close();
      break;  // keep-alive timeout: nothing was asked
    case Phase::kHeader:
      refuse_request(408,
                     fmt::format("the request header did not arrive within {} ms; send it whole, at once",
                                 options_.header_timeout.count()),
                     {}, false);
      break;
    case Phase::kBody:
      refuse_request(408, fmt::format("the request body did not arrive within {} ms", options_.body_timeout.count()),
                     {}, false);
      break;
    case Phase::kHandling:
      write_timed_out();
      break;  // the client reads nothing
    case Phase::kClosing:
    case Phase::kClosed:
      close();
      break;
  }
}

void HttpConnection::log_access() {
  if (logged_ || (status_ == 0 && !exchange_)) return;
  logged_ = true;
  AccessRecord record;
  record.method = method_;
  record.target = target_;
  record.client = client_;
  record.status = status_;
  record.client_gone = gone_;
  record.connection_refused = refused_on_arrival_;
  if (exchange_) {
    std::lock_guard lock(exchange_->mutex);
    if (exchange_->status != 0) record.status = exchange_->status;
    record.note = exchange_->note;
  }
  if (record.status == 0) return;
  record.seconds = std::chrono::duration<double>(Clock::now() - request_start_).count();
  host_.handler().on_access(record);
}

}  // namespace folio::server
