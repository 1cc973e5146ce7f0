#include "engine/request_stream.h"

namespace folio {
namespace {

// Folds `later` into `earlier`: deltas of the same completion concatenate.
void merge(RequestOutput& earlier, RequestOutput&& later) {
  for (CompletionDelta& d : later.deltas) {
    CompletionDelta* same = nullptr;
    for (CompletionDelta& e : earlier.deltas)
      if (e.index == d.index) same = &e;
    if (same == nullptr) {
      earlier.deltas.push_back(std::move(d));
      continue;
    }
    same->token_ids.insert(same->token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    same->text += d.text;
    same->logprobs.insert(same->logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finish_reason) {
      same->finish_reason = d.finish_reason;
      same->stop_reason = std::move(d.stop_reason);
      same->stop_token = d.stop_token;
    }
  }
  earlier.finished = later.finished;
  earlier.usage = later.usage;
  if (!later.error.empty()) earlier.error = std::move(later.error);
}

}  // namespace

std::uint64_t OutputSignal::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

void OutputSignal::wait_past(std::uint64_t seen) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return generation_ != seen; });
}

void OutputSignal::notify() {
  {
    std::lock_guard lock(mutex_);
    ++generation_;
  }
  changed_.notify_all();
}

void RequestStream::push(RequestOutput output) {
  std::shared_ptr<OutputSignal> signal;
  {
    std::lock_guard lock(mutex_);
    if (ended_) return;
    ended_ = output.finished;
    if (pending_) {
      merge(*pending_, std::move(output));
    } else {
      pending_ = std::move(output);
    }
    signal = signal_;
  }
  ready_.notify_all();
  if (signal) signal->notify();
}

void RequestStream::attach(std::shared_ptr<OutputSignal> signal) {
  std::lock_guard lock(mutex_);
  signal_ = std::move(signal);
}

std::optional<RequestOutput> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto has_output = [this] { return pending_.has_value() || drained_; };
  if (timeout == std::chrono::milliseconds::max()) {
    ready_.wait(lock, has_output);
  } else if (!ready_.wait_for(lock, timeout, has_output)) {
    return std::nullopt;
  }
  if (!pending_) return std::nullopt;
  RequestOutput out = std::move(*pending_);
  pending_.reset();
  if (out.finished) drained_ = true;
  return out;
}

bool RequestStream::finished() const {
  std::lock_guard lock(mutex_);
  return ended_;
}

}  // namespace folio
