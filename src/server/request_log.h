// RequestLog: what the one-line access log says about the request the calling
// HTTP thread is serving (tokens, a client that hung up). A connection is
// served start to end on one thread, handler and stream alike, so the record
// is thread-local: handlers fill it, the logger prints and resets it.
#pragma once

#include <chrono>

namespace folio::server {

struct RequestLog {
  std::chrono::steady_clock::time_point start{};
  int prompt_tokens = -1;       // -1: not a generation request
  int completion_tokens = 0;
  bool client_gone = false;     // the client hung up before the answer was complete

  static RequestLog& current() {
    thread_local RequestLog log;
    return log;
  }
};

}  // namespace folio::server
