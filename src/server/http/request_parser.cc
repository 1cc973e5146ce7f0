#include "server/http/request_parser.h"

#include <fmt/format.h>

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <vector>

namespace folio::server {
namespace http = boost::beast::http;
using boost::beast::error_code;

namespace {

bool has_control(std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7F) return true;
  }
  return false;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// A comma-separated list's elements, without the spaces around them.
std::vector<std::string> token_list(std::string_view value) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= value.size()) {
    std::size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view item = value.substr(pos, comma - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.push_back(lower(item));
    pos = comma + 1;
  }
  return out;
}

bool has_body_semantics(std::string_view method) { return method == "POST" || method == "PUT" || method == "PATCH"; }

// A request line that ends, with CRLF, in a well-formed version Beast does
// not read ("HTTP/2.0"): 505, where a malformed line is 400.
bool names_another_version(std::string_view bytes) {
  const std::size_t lf = bytes.find('\n');
  if (lf == std::string_view::npos || lf < 9 || bytes[lf - 1] != '\r') return false;
  const std::string_view v = bytes.substr(lf - 9, 8);
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  return v.substr(0, 5) == "HTTP/" && digit(v[5]) && v[6] == '.' && digit(v[7]);
}

}  // namespace

std::optional<std::string> decode_path(std::string_view path) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(path.size());
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') {
      out += path[i];
      continue;
    }
    if (i + 2 >= path.size() || hex(path[i + 1]) < 0 || hex(path[i + 2]) < 0) return std::nullopt;
    out += static_cast<char>(hex(path[i + 1]) * 16 + hex(path[i + 2]));
    i += 2;
  }
  if (has_control(out) || out.find('\t') != std::string::npos) return std::nullopt;
  return out;
}

// Beast's parser, calling back into RequestParser for every piece.
class RequestParser::Impl final : public http::basic_parser<true> {
 public:
  explicit Impl(RequestParser& owner) : owner_(owner) {
    // The limits are ours (RequestParser counts them across reads); Beast's
    // own header limit bounds only the bytes of one call, its body limit is off.
    header_limit(static_cast<std::uint32_t>(owner.limits_.max_header_bytes));
    body_limit(boost::none);
    eager(false);
  }

 private:
  // Any error code stops Beast; the refusal already says why.
  void stop(error_code& ec, int status, std::string message) {
    owner_.refuse(status, std::move(message));
    ec = http::error::bad_value;
  }

  void on_request_impl(http::verb, boost::beast::string_view method, boost::beast::string_view target, int version,
                       error_code& ec) override {
    const HttpLimits& limits = owner_.limits_;
    HttpRequest& r = owner_.request_;
    owner_.have_request_line_ = true;
    if (version != 10 && version != 11)
      return stop(ec, 505, fmt::format("HTTP/{}.{} is not supported; send HTTP/1.1", version / 10, version % 10));
    if (target.size() > limits.max_line_bytes)
      return stop(ec, 414,
                  fmt::format("the request target has {} bytes; this server reads at most {}", target.size(),
                              limits.max_line_bytes));
    owner_.header_bytes_ += method.size() + target.size() + 11;
    r.method = std::string(method);
    r.target = std::string(target);
    r.version = version;
    std::string_view t(target.data(), target.size());
    // The absolute form (what a client sends a proxy) names the same path.
    for (std::string_view scheme : {"http://", "https://"}) {
      if (t.size() >= scheme.size() && equals_ignore_case(t.substr(0, scheme.size()), scheme)) {
        const std::size_t slash = t.find('/', scheme.size());
        t = slash == std::string_view::npos ? std::string_view("/") : t.substr(slash);
        break;
      }
    }
    if (t == "*" && method == "OPTIONS") {
      r.path = "*";
      return;
    }
    if (t.empty() || t.front() != '/') return stop(ec, 400, "the request target must be a path starting with /");
    const std::size_t q = t.find('?');
    if (q != std::string_view::npos) r.query = std::string(t.substr(q + 1));
    auto path = decode_path(t.substr(0, q));
    if (!path) return stop(ec, 400, "the request path holds a malformed %-escape or an escaped control character");
    r.path = std::move(*path);
  }

  void on_response_impl(int, boost::beast::string_view, int, error_code& ec) override { ec = http::error::bad_method; }

  void on_field_impl(http::field, boost::beast::string_view name, boost::beast::string_view value,
                     error_code& ec) override {
    const HttpLimits& limits = owner_.limits_;
    HttpRequest& r = owner_.request_;
    const std::size_t line = name.size() + value.size() + 4;
    if (static_cast<int>(r.fields.size()) >= limits.max_header_fields)
      return stop(ec, 431, fmt::format("the request has more than {} header fields", limits.max_header_fields));
    if (line > limits.max_line_bytes)
      return stop(ec, 431,
                  fmt::format("the header field {} is longer than {} bytes", printable(std::string_view(name), 64),
                              limits.max_line_bytes));
    owner_.header_bytes_ += line;
    if (owner_.header_bytes_ > limits.max_header_bytes)
      return stop(ec, 431, fmt::format("the request header is larger than {} bytes", limits.max_header_bytes));
    if (has_control(std::string_view(value.data(), value.size())))
      return stop(ec, 400,
                  fmt::format("the header field {} holds a control character", printable(std::string_view(name), 64)));
    r.fields.emplace_back(std::string(name), std::string(value));
  }

  void on_header_impl(error_code& ec) override {
    RequestParser& o = owner_;
    HttpRequest& r = o.request_;
    int num_hosts = 0;
    std::vector<std::string> codings;
    for (const auto& [name, value] : r.fields) {
      if (equals_ignore_case(name, "host")) {
        ++num_hosts;
      } else if (equals_ignore_case(name, "transfer-encoding")) {
        for (std::string& c : token_list(value)) codings.push_back(std::move(c));
      } else if (equals_ignore_case(name, "content-encoding")) {
        for (const std::string& c : token_list(value))
          if (c != "identity")
            return stop(ec, 415,
                        fmt::format("Content-Encoding {} is not accepted: send the request body uncompressed",
                                    printable(c, 64)));
      } else if (equals_ignore_case(name, "expect")) {
        if (!equals_ignore_case(value, "100-continue"))
          return stop(ec, 417, fmt::format("Expect: {} is not supported", printable(value, 64)));
        o.expects_continue_ = r.version == 11;
      }
    }
    if (num_hosts > 1) return stop(ec, 400, "the request has more than one Host field");
    if (num_hosts == 0 && r.version == 11) return stop(ec, 400, "an HTTP/1.1 request must have a Host field");
    if (!codings.empty()) {
      if (r.version == 10) return stop(ec, 400, "Transfer-Encoding is not allowed in an HTTP/1.0 request");
      for (std::size_t i = 0; i + 1 < codings.size(); ++i)
        if (codings[i] == "chunked") return stop(ec, 400, "chunked must be the last transfer coding, and only once");
      if (codings.back() != "chunked")
        return stop(ec, 400, "the body's length cannot be known: chunked must be the last transfer coding");
      if (codings.size() > 1)
        return stop(ec, 501,
                    fmt::format("transfer coding {} is not supported; send the body chunked or with "
                                "Content-Length",
                                printable(codings.front(), 64)));
      o.chunked_ = true;
    }
    if (auto length = content_length()) o.content_length_ = *length;
    if (!o.chunked_ && !o.content_length_ && has_body_semantics(r.method))
      return stop(ec, 411, fmt::format("a {} request needs Content-Length (or chunked Transfer-Encoding)", r.method));
    if (o.content_length_ && *o.content_length_ > o.limits_.max_body_bytes)
      return stop(ec, 413, body_too_large(*o.content_length_));
  }

  std::string body_too_large(std::uint64_t bytes) const {
    return fmt::format(
        "the request body{} is larger than this server's limit of {} bytes; send less, or start "
        "the server with a larger --max-body-bytes",
        bytes > 0 ? fmt::format(" ({} bytes)", bytes) : std::string(), owner_.limits_.max_body_bytes);
  }

  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    if (length) owner_.request_.body.reserve(static_cast<std::size_t>(*length));
  }

  std::size_t on_body_impl(boost::beast::string_view body, error_code& ec) override {
    std::string& b = owner_.request_.body;
    if (b.size() + body.size() > owner_.limits_.max_body_bytes) {
      stop(ec, 413, body_too_large(0));
      return 0;
    }
    b.append(body.data(), body.size());
    return body.size();
  }

  void on_chunk_header_impl(std::uint64_t size, boost::beast::string_view, error_code& ec) override {
    // The chunks so far plus this one, before any of its bytes are held.
    if (owner_.request_.body.size() + size > owner_.limits_.max_body_bytes) stop(ec, 413, body_too_large(0));
  }

  std::size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view body, error_code& ec) override {
    return on_body_impl(body, ec);
  }

  void on_finish_impl(error_code&) override {}

  RequestParser& owner_;
};

RequestParser::RequestParser(const HttpLimits& limits) : limits_(limits), impl_(std::make_unique<Impl>(*this)) {}

RequestParser::~RequestParser() = default;

void RequestParser::refuse(int status, std::string message) {
  if (state_ == State::kRefused) return;
  state_ = State::kRefused;
  refusal_ = {status, std::move(message)};
}

bool RequestParser::got_some() const { return impl_->got_some(); }

bool RequestParser::keep_alive() const { return impl_->is_header_done() && impl_->keep_alive(); }

bool RequestParser::folds_a_line(std::string_view bytes) {
  // Only the bytes not seen before are read, so a header trickled a byte at a
  // time costs linear time; the scan ends with the header.
  for (std::size_t i = std::max<std::size_t>(scanned_, 2); i < bytes.size() && !header_end_seen_; ++i) {
    if (bytes[i - 1] != '\n' || bytes[i - 2] != '\r') continue;
    if (bytes[i] == ' ' || bytes[i] == '\t') return true;
    if (i + 1 < bytes.size() && bytes[i] == '\r' && bytes[i + 1] == '\n') header_end_seen_ = true;
  }
  scanned_ = std::max(scanned_, bytes.size());
  return false;
}

std::size_t RequestParser::feed(std::string_view bytes) {
  if (!header_end_seen_ && folds_a_line(bytes)) {
    refuse(400, "a header line starts with white space (obsolete line folding); send each field on one line");
    return 0;
  }
  std::size_t used = 0;
  while (state_ == State::kNeedMore && used < bytes.size()) {
    error_code ec;
    const std::size_t n = impl_->put(boost::asio::const_buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (state_ == State::kRefused) break;
    if (ec == http::error::need_more) break;
    if (ec) {
      if (ec == http::error::bad_content_length) {
        refuse(400,
               "Content-Length is not a single number, or comes together with Transfer-Encoding; send one "
               "length, or the body chunked");
      } else if (ec == http::error::multiple_content_length) {
        refuse(400, "the request has Content-Length fields that differ; send one");
      } else if (ec == http::error::bad_transfer_encoding) {
        refuse(400, "Transfer-Encoding comes together with Content-Length, or twice; send one of them, once");
      } else if (ec == http::error::bad_version && names_another_version(bytes)) {
        refuse(505, "only HTTP/1.1 and HTTP/1.0 are served");
      } else if (ec == http::error::header_limit) {
        // Beast holds a header that arrives in pieces until it is whole.
        const bool line_done =
            have_request_line_ || bytes.substr(0, limits_.max_line_bytes + 2).find("\r\n") != std::string_view::npos;
        refuse(line_done ? 431 : 414,
               line_done ? fmt::format("the request header is larger than {} bytes", limits_.max_header_bytes)
                         : fmt::format("the request line is longer than {} bytes", limits_.max_line_bytes));
      } else {
        refuse(400, fmt::format("the request is not valid HTTP/1.1 ({})", ec.message()));
      }
      break;
    }
    if (impl_->is_header_done() && !body_resumed_) {
      state_ = State::kHeaderDone;
    } else if (impl_->is_done()) {
      state_ = State::kComplete;
    }
    if (n == 0) break;
  }
  scanned_ = scanned_ > used ? scanned_ - used : 0;
  return used;
}

void RequestParser::resume_body() {
  if (state_ != State::kHeaderDone) return;
  body_resumed_ = true;
  impl_->eager(true);
  state_ = impl_->is_done() ? State::kComplete : State::kNeedMore;
}

void RequestParser::buffer_full() {
  if (state_ != State::kNeedMore) return;
  if (!have_request_line_) {
    refuse(414, fmt::format("the request line is longer than {} bytes", limits_.max_line_bytes));
  } else if (!impl_->is_header_done()) {
    refuse(431, fmt::format("a header line is longer than {} bytes", limits_.max_line_bytes));
  } else {
    refuse(400, "a chunk header (its size and extensions) is too long");
  }
}

void RequestParser::end_of_input() {
  if (state_ != State::kNeedMore && state_ != State::kHeaderDone) return;
  if (got_some()) refuse(400, "the connection was closed before the whole request was sent");
}

}  // namespace folio::server
