// libFuzzer target for RequestParser: any bytes, cut into pieces anywhere (the
// first byte picks the piece size), leave the parser in one of its states
// without it reading past what it was given; a whole request keeps every
// limit and a path without control characters; a refusal is a 4xx or 5xx with
// a message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/request_parser.h"
#include "support/parse_in_pieces.h"

using folio::server::RequestParser;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  folio::server::HttpLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_line_bytes = 512;
  limits.max_header_fields = 16;
  limits.max_body_bytes = 4096;

  RequestParser p(limits);
  folio::testing::parse_in_pieces(p, input, piece, limits.max_header_bytes + 256);  // as a connection bounds its buffer
  if (p.state() == RequestParser::State::kComplete) {
    const folio::server::HttpRequest r = p.take_request();
    if (r.body.size() > limits.max_body_bytes) __builtin_trap();
    if (r.fields.size() > static_cast<std::size_t>(limits.max_header_fields)) __builtin_trap();
    for (char c : r.path)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) __builtin_trap();
  }
  if (p.state() == RequestParser::State::kRefused &&
      (p.refusal().status < 400 || p.refusal().status > 599 || p.refusal().message.empty()))
    __builtin_trap();
  return 0;
}
