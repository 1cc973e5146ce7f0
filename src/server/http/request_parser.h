// RequestParser: one HTTP/1.1 request read strictly from bytes as they arrive,
// over Boost.Beast's parser, within explicit limits. Framing that a proxy and
// this server could read differently is refused, never guessed at:
// Content-Length with Transfer-Encoding, differing Content-Lengths, transfer
// codings other than chunked, compressed bodies, a body-carrying method with
// no length. Every limit counts what the request costs to hold: the whole
// header (however it is split across reads), each line, the number of fields,
// and the body after chunked decoding. Pure logic over bytes: no socket, no
// clock; the connection adds the deadlines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/http/http_message.h"

namespace folio::server {

struct HttpLimits {
  std::size_t max_header_bytes = 32 << 10;  // the request line and every field line, together
  std::size_t max_line_bytes = 8 << 10;     // the request line, or one field line
  int max_header_fields = 100;
  std::uint64_t max_body_bytes = 16 << 20;  // after chunked decoding
};

// Why a request is refused before it reaches a handler.
struct HttpRefusal {
  int status = 400;
  std::string message;  // what the client is told, and what to do
};

class RequestParser {
 public:
  enum class State {
    kNeedMore,    // feed more bytes
    kHeaderDone,  // the header is in and passed the checks (bodiless requests too); resume_body() goes on
    kComplete,    // the whole request is in: take_request()
    kRefused,     // refusal() says why; the connection must close after answering
  };

  explicit RequestParser(const HttpLimits& limits);
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Reads what it can of `bytes` and returns how many it consumed; the rest
  // must be fed again with more bytes after it. Stops after the header.
  std::size_t feed(std::string_view bytes);
  // The read buffer is full and holds no whole line: refuses (431, or 414
  // while the request line is still being read).
  void buffer_full();
  // The peer closed its side; refuses a request cut short (a clean close
  // before any byte is not a refusal: got_some() is false then).
  void end_of_input();
  // After kHeaderDone: the body is read by the next feed() calls.
  void resume_body();

  State state() const { return state_; }
  const HttpRefusal& refusal() const { return refusal_; }
  bool got_some() const;
  // Valid from kHeaderDone on.
  const HttpRequest& request() const { return request_; }
  bool keep_alive() const;
  bool expects_continue() const { return expects_continue_; }
  std::optional<std::uint64_t> content_length() const { return content_length_; }
  bool chunked() const { return chunked_; }
  // kComplete: the request, which leaves the parser.
  HttpRequest take_request() { return std::move(request_); }

 private:
  class Impl;
  friend class Impl;
  void refuse(int status, std::string message);
  // Whether the header in `bytes` folds a line (CRLF then a space or tab).
  bool folds_a_line(std::string_view bytes);

  HttpLimits limits_;
  std::unique_ptr<Impl> impl_;
  State state_ = State::kNeedMore;
  HttpRefusal refusal_;
  HttpRequest request_;
  std::size_t header_bytes_ = 0;
  bool have_request_line_ = false;
  bool expects_continue_ = false;
  bool chunked_ = false;
  bool body_resumed_ = false;
  std::size_t scanned_ = 0;  // bytes of the caller's buffer read by folds_a_line
  bool header_end_seen_ = false;
  std::optional<std::uint64_t> content_length_;
};

// Percent-decodes a path; nullopt when an escape is malformed or the result
// holds a control character (CR, LF, NUL, ...), which no route has.
std::optional<std::string> decode_path(std::string_view path);

}  // namespace folio::server
