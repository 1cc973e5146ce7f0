#include "cli/bench/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace folio::cli {

BenchProgress::BenchProgress(std::string label, int num_requests, std::int64_t num_output_tokens, bool enabled)
    : label_(std::move(label)),
      num_requests_(num_requests),
      num_output_tokens_(num_output_tokens),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()) {
  if (!enabled_) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mutex_);
    while (!stop_cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) draw(false);
  });
}

BenchProgress::~BenchProgress() {
  if (!enabled_) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
  draw(true);
}

bool BenchProgress::stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void BenchProgress::draw(bool final) {
  constexpr int kWidth = 30;
  const int done = requests_.load(std::memory_order_relaxed);
  const std::int64_t tokens = tokens_.load(std::memory_order_relaxed);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // Tokens measure progress better than requests when they finish together.
  const double fraction =
      num_output_tokens_ > 0 ? std::min(1.0, static_cast<double>(tokens) / static_cast<double>(num_output_tokens_))
                             : static_cast<double>(done) / std::max(1, num_requests_);
  const int filled = static_cast<int>(fraction * kWidth);
  const std::string bar = std::string(static_cast<std::size_t>(filled), '#') +
                          std::string(static_cast<std::size_t>(kWidth - filled), '.');
  const std::string text = fmt::format("\r{} [{}] {}/{} requests, {} tokens, {:.1f} tok/s, {:.1f} s", label_, bar, done,
                                       num_requests_, tokens, elapsed > 0 ? static_cast<double>(tokens) / elapsed : 0.0,
                                       elapsed);
  std::fputs(text.c_str(), stderr);
  if (final) std::fputs("\n", stderr);
  std::fflush(stderr);
}

}  // namespace folio::cli
