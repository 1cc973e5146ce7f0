// ServerCounters: what the HTTP side counts for /metrics beside the engine's
// own statistics: finished requests by finish reason and responses by status.
// Thread-safe; handlers on many threads add to it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace folio::server {

class ServerCounters {
 public:
  void count_finish(const std::string& reason) {
    std::lock_guard lock(mutex_);
    ++finished_[reason];
  }
  void count_status(int status) {
    std::lock_guard lock(mutex_);
    ++statuses_[status];
  }
  std::map<std::string, std::int64_t> finished() const {
    std::lock_guard lock(mutex_);
    return finished_;
  }
  std::map<int, std::int64_t> statuses() const {
    std::lock_guard lock(mutex_);
    return statuses_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::int64_t> finished_;  // finish reason -> requests (choices)
  std::map<int, std::int64_t> statuses_;           // HTTP status -> responses
};

}  // namespace folio::server
