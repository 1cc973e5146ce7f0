#include "server/disconnect_watcher.h"

#include <poll.h>

#include <cerrno>
#include <vector>

namespace folio::server {

DisconnectWatcher::DisconnectWatcher() : thread_([this] { loop(); }) {}

DisconnectWatcher::~DisconnectWatcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::uint64_t DisconnectWatcher::watch(int socket, std::function<void()> on_hangup) {
  std::lock_guard lock(mutex_);
  const std::uint64_t handle = next_handle_++;
  entries_.emplace(handle, Entry{socket, std::move(on_hangup)});
  wake_.notify_all();
  return handle;
}

void DisconnectWatcher::unwatch(std::uint64_t handle) {
  std::lock_guard lock(mutex_);
  entries_.erase(handle);
}

void DisconnectWatcher::loop() {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> handles;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !entries_.empty(); });
      if (stop_) return;
      fds.clear();
      handles.clear();
      for (const auto& [handle, entry] : entries_) {
        // Only the peer's FIN (POLLRDHUP); POLLHUP and POLLERR always count.
        // Not POLLIN: a client may send its next request early.
        fds.push_back(pollfd{entry.socket, POLLRDHUP, 0});
        handles.push_back(handle);
      }
    }
    int ready = ::poll(fds.data(), fds.size(), static_cast<int>(kPollInterval.count()));
    if (ready < 0 && errno != EINTR) ready = 0;
    std::vector<std::function<void()>> fire;
    if (ready > 0) {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) == 0) continue;
        auto it = entries_.find(handles[i]);
        if (it == entries_.end()) continue;
        fire.push_back(std::move(it->second.on_hangup));
        entries_.erase(it);
      }
    }
    for (auto& f : fire) f();
    // A socket that stays readable for another reason must not spin the loop.
    if (ready > 0 && fire.empty()) {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, kPollInterval, [this] { return stop_; });
    }
  }
}

}  // namespace folio::server
