#include "server/http_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace folio::server {
namespace {

thread_local int tls_socket = -1;

// Waits for `events` on `sock` for up to timeout_ms; true when one came.
bool wait_socket(int sock, short events, int timeout_ms) {
  pollfd p{sock, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    return r > 0 && (p.revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

// The same, in slices, giving up early once the listener has been closed
// (Server::stop), so that a stalled client cannot hold up shutdown.
bool wait_socket(int sock, short events, int timeout_ms, const std::atomic<int>& listener) {
  constexpr int kSliceMs = 100;
  for (int waited = 0;; waited += kSliceMs) {
    if (wait_socket(sock, events, std::min(kSliceMs, timeout_ms - waited))) return true;
    if (waited + kSliceMs >= timeout_ms || listener == INVALID_SOCKET) return false;
  }
}

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int r = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
                     : ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  std::array<char, INET6_ADDRSTRLEN> buf{};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, buf.data(), buf.size());
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf.data(), buf.size());
    port = ntohs(a->sin6_port);
  }
  ip = buf.data();
}

// A connection's byte stream for cpp-httplib: buffered reads (the library
// reads request lines a byte at a time), poll() for timeouts, and writes that
// fail once the peer has gone instead of raising SIGPIPE.
class PollStream final : public httplib::Stream {
 public:
  PollStream(int sock, int read_timeout_ms, int write_timeout_ms, const std::atomic<int>& listener)
      : sock_(sock), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms), listener_(listener) {}

  bool is_readable() const override {
    return begin_ < end_ || wait_socket(sock_, POLLIN, read_timeout_ms_, listener_);
  }

  bool is_writable() const override {
    if (!wait_socket(sock_, POLLOUT, write_timeout_ms_, listener_)) return false;
    // Writable, but has the peer hung up? (Its FIN shows as POLLRDHUP.)
    pollfd p{sock_, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!wait_socket(sock_, POLLIN, read_timeout_ms_, listener_)) return -1;
      ssize_t n;
      do {
        n = ::recv(sock_, buffer_.data(), buffer_.size(), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<std::size_t>(n);
    }
    const std::size_t take = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_.data() + begin_, take);
    begin_ += take;
    return static_cast<ssize_t>(take);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_socket(sock_, POLLOUT, write_timeout_ms_, listener_)) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(sock_, false, ip, port); }
  socket_t socket() const override { return sock_; }

  bool has_buffered() const { return begin_ < end_; }

 private:
  int sock_;
  int read_timeout_ms_;
  int write_timeout_ms_;
  const std::atomic<int>& listener_;
  std::array<char, 4096> buffer_{};
  std::size_t begin_ = 0, end_ = 0;
};

int to_ms(time_t sec, time_t usec) { return static_cast<int>(sec * 1000 + usec / 1000); }

}  // namespace

HttpListener::HttpListener(int num_threads) {
  const auto n = static_cast<std::size_t>(num_threads > 0 ? num_threads : 1);
  new_task_queue = [n] { return new httplib::ThreadPool(n); };
  // The library's default also sets SO_REUSEPORT, which lets a second server
  // bind the same port and silently take half the connections.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

int HttpListener::bind(const std::string& host, int port, int backlog) {
  int bound = port;
  if (port == 0) {
    bound = bind_to_any_port(host);
    if (bound < 0) fail("cannot listen on {}: no free port; choose one with --port", host);
  } else if (!bind_to_port(host, port)) {
    fail("cannot listen on {}:{} ({}); is another server using the port? Choose another with --port, or the "
         "address with --host",
         host, port, std::strerror(errno));
  }
  // The library listens with a backlog of 5; a burst of clients needs more.
  ::listen(svr_sock_, backlog);
  return bound;
}

int HttpListener::current_socket() { return tls_socket; }

bool HttpListener::wait_for_request(int sock) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
  while (svr_sock_ != INVALID_SOCKET) {
    if (wait_socket(sock, POLLIN, 100)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
  return false;
}

bool HttpListener::process_and_close_socket(socket_t sock) {
  tls_socket = sock;
  PollStream stream(sock, to_ms(read_timeout_sec_, read_timeout_usec_), to_ms(write_timeout_sec_, write_timeout_usec_),
                    svr_sock_);
  bool ok = false;
  for (std::size_t remaining = keep_alive_max_count_; remaining > 0; --remaining) {
    if (!stream.has_buffered() && !wait_for_request(sock)) break;
    bool closed = false;
    ok = process_request(stream, remaining == 1, closed, nullptr);
    if (!ok || closed) break;
  }
  tls_socket = -1;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace folio::server
