// Wall-clock time as OpenAI's `created` fields carry it: whole seconds since
// the Unix epoch. The server's one reading of the system clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace folio::server {

inline std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace folio::server
