// parse_in_pieces: drives a RequestParser as a connection does, `piece` bytes
// a read into a buffer of at most `buffer_max` bytes, resuming the body after
// the header, until the parser stops (done, refused, or the input ends). For
// the parser's tests and its fuzz target, which choose where bytes are cut.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include "server/http/request_parser.h"

namespace folio::testing {

// Returns the bytes the parser did not consume (a pipelined next request).
inline std::string parse_in_pieces(server::RequestParser& p, std::string_view bytes, std::size_t piece,
                                   std::size_t buffer_max = std::string::npos) {
  using State = server::RequestParser::State;
  std::string buffer;
  std::size_t sent = 0;
  for (;;) {
    if (p.state() == State::kHeaderDone) p.resume_body();
    if (p.state() != State::kNeedMore) break;
    if (sent < bytes.size() && buffer.size() < buffer_max) {
      const std::size_t take = std::min({piece, bytes.size() - sent, buffer_max - buffer.size()});
      buffer.append(bytes.substr(sent, take));
      sent += take;
    } else if (sent < bytes.size()) {
      p.buffer_full();
      break;
    }
    const std::size_t used = p.feed(buffer);
    if (used > buffer.size()) __builtin_trap();  // never past what it was given
    buffer.erase(0, used);
    if (sent == bytes.size() && used == 0 && p.state() == State::kNeedMore) {
      p.end_of_input();
      break;
    }
  }
  return buffer + std::string(bytes.substr(sent));
}

}  // namespace folio::testing
