// DisconnectWatcher: one thread that notices clients hanging up while their
// request runs (streaming or not) and calls the request's on_hangup (which
// aborts it in the engine, freeing its KV blocks within a step). It polls every
// watched socket for the peer's FIN or a reset, every kPollInterval, in one
// poll() call, so a thousand waiting requests cost one syscall per interval.
// (A client that shuts down only its sending side counts as gone.)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace folio::server {

class DisconnectWatcher {
 public:
  static constexpr std::chrono::milliseconds kPollInterval{20};

  DisconnectWatcher();
  ~DisconnectWatcher();
  DisconnectWatcher(const DisconnectWatcher&) = delete;
  DisconnectWatcher& operator=(const DisconnectWatcher&) = delete;

  // Watches `socket` until unwatch(); on_hangup runs at most once, on the
  // watcher's thread. It must stay harmless if it races with unwatch() (a
  // socket number can be reused once its connection closes).
  std::uint64_t watch(int socket, std::function<void()> on_hangup);
  void unwatch(std::uint64_t handle);

 private:
  struct Entry {
    int socket;
    std::function<void()> on_hangup;
  };
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::uint64_t, Entry> entries_;
  std::uint64_t next_handle_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace folio::server
