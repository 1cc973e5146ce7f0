// Error: the one exception type folio throws for bad input or a failed
// operation; its message says what went wrong and what to do about it.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace folio {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// An internal invariant: on failure it names the broken condition. Always on,
// because the places that use it are not hot.
#define FOLIO_CHECK(cond)                                                               \
  do {                                                                                  \
    if (!(cond)) ::folio::fail("internal check failed: {} ({}:{})", #cond, __FILE__, __LINE__); \
  } while (0)

}  // namespace folio
