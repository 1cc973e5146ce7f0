#include "server/generation_call.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <utility>

#include "server/api_error.h"
#include "server/openai_response.h"
#include "server/request_log.h"

namespace folio::server {
namespace {

ApiError refusal(const EngineError& e) {
  switch (e.kind()) {
    case EngineError::Kind::kBusy: return ApiError(429, e.what(), "", "rate_limit_exceeded");
    case EngineError::Kind::kDraining: return ApiError(503, e.what());
    case EngineError::Kind::kInvalid: break;
  }
  return ApiError(400, e.what());
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void append_event(std::string& out, const Json& j) {
  out += "data: ";
  out += dump(j);
  out += "\n\n";
}

// Takes outputs from several engine streams (one per prompt) as they come.
class OutputMux {
 public:
  explicit OutputMux(const std::vector<std::shared_ptr<RequestStream>>& streams)
      : streams_(streams), ended_(streams.size(), false) {}

  // The next output and its prompt; nullopt once every stream has ended.
  std::optional<std::pair<int, RequestOutput>> next() {
    using std::chrono::milliseconds;
    for (;;) {
      int first_open = -1, num_open = 0;
      for (std::size_t i = 0; i < streams_.size(); ++i)
        if (!ended_[i]) {
          if (first_open < 0) first_open = static_cast<int>(i);
          ++num_open;
        }
      if (num_open == 0) return std::nullopt;
      if (num_open == 1) return take(first_open, milliseconds::max());
      for (std::size_t k = 0; k < streams_.size(); ++k) {
        const std::size_t i = (cursor_ + k) % streams_.size();
        if (ended_[i]) continue;
        if (auto out = take(static_cast<int>(i), milliseconds(0))) {
          cursor_ = i + 1;
          return out;
        }
      }
      // Nothing ready: wait a little on one of them, then sweep again.
      if (auto out = take(first_open, milliseconds(5))) return out;
    }
  }

 private:
  std::optional<std::pair<int, RequestOutput>> take(int i, std::chrono::milliseconds timeout) {
    auto out = streams_[static_cast<std::size_t>(i)]->next(timeout);
    if (!out) {
      // An ended stream whose last output was taken answers nullopt at once.
      if (streams_[static_cast<std::size_t>(i)]->finished() && timeout == std::chrono::milliseconds::max())
        ended_[static_cast<std::size_t>(i)] = true;
      return std::nullopt;
    }
    if (out->finished) ended_[static_cast<std::size_t>(i)] = true;
    return std::make_pair(i, std::move(*out));
  }

  const std::vector<std::shared_ptr<RequestStream>>& streams_;
  std::vector<bool> ended_;
  std::size_t cursor_ = 0;
};

// One job in flight. Destroyed when the answer is written or abandoned: it
// then aborts whatever still runs (a no-op for finished requests), stops
// watching the socket and reports done.
struct Call {
  GenerationContext context;
  GenerationJob job;
  std::vector<std::shared_ptr<RequestStream>> streams;  // [num_prompts]
  std::vector<Usage> usage;                             // [num_prompts]
  std::shared_ptr<std::atomic<bool>> client_gone = std::make_shared<std::atomic<bool>>(false);
  std::uint64_t watch = 0;
  std::function<void()> on_done;
  std::string error;  // an engine-side failure

  ~Call() {
    if (watch != 0) context.watcher->unwatch(watch);
    abort_unfinished();
    if (on_done) on_done();
  }

  void abort_unfinished() const {
    for (const auto& s : streams)
      if (!s->finished()) context.engine->abort(s->id());
  }

  Usage total_usage() const {
    Usage t;
    for (const Usage& u : usage) {
      t.prompt_tokens += u.prompt_tokens;
      t.completion_tokens += u.completion_tokens;
      t.cached_tokens += u.cached_tokens;
    }
    return t;
  }

  void record(const ResponseBuilder& builder) const {
    const Usage t = total_usage();
    RequestLog& log = RequestLog::current();
    log.prompt_tokens = t.prompt_tokens;
    log.completion_tokens = t.completion_tokens;
    log.client_gone = *client_gone;
    for (const std::string& reason : builder.finish_reasons())
      context.counters->count_finish(reason.empty() ? "abort" : reason);
  }
};

// Writes the job's events as they come; false when the client is gone.
bool stream_events(Call& call, ResponseBuilder& builder, httplib::DataSink& sink) {
  auto send = [&](const std::string& events) {
    if (events.empty() || sink.write(events.data(), events.size())) return true;
    call.client_gone->store(true);
    call.abort_unfinished();
    return false;
  };
  std::string events;
  for (const Json& c : builder.opening_chunks()) append_event(events, c);
  if (!send(events)) return false;
  OutputMux mux(call.streams);
  while (auto item = mux.next()) {
    auto& [prompt, out] = *item;
    events.clear();
    for (const CompletionDelta& d : out.deltas) {
      Json c = builder.chunk(prompt, d);
      if (!c.is_null()) append_event(events, c);
    }
    call.usage[static_cast<std::size_t>(prompt)] = out.usage;
    if (!out.error.empty()) append_event(events, Json::parse(ApiError(400, out.error).body()));
    if (!send(events)) {
      call.record(builder);
      return false;
    }
  }
  call.record(builder);
  events.clear();
  if (call.job.include_usage) append_event(events, builder.usage_chunk(call.total_usage()));
  events += "data: [DONE]\n\n";
  if (!send(events)) return false;
  sink.done();
  return true;
}

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void run_generation(const GenerationContext& context, GenerationJob job, httplib::Response& res,
                    std::function<void()> on_done) {
  auto call = std::make_shared<Call>();
  call->context = context;
  call->job = std::move(job);
  call->on_done = std::move(on_done);
  call->usage.resize(call->job.prompts.size());
  for (auto& prompt : call->job.prompts) {
    EngineRequest request;
    request.prompt = std::move(prompt);
    request.params = call->job.params;
    request.speculative = call->job.speculative;
    try {
      call->streams.push_back(context.engine->submit(std::move(request)));
    } catch (const EngineError& e) {
      throw refusal(e);  // ~Call aborts the prompts already submitted
    }
  }
  if (context.socket >= 0) {
    std::vector<std::uint64_t> ids;
    for (const auto& s : call->streams) ids.push_back(s->id());
    call->watch = context.watcher->watch(context.socket, [engine = context.engine, ids, gone = call->client_gone] {
      gone->store(true);
      for (std::uint64_t id : ids) engine->abort(id);
    });
  }
  const bool chat = call->job.endpoint == Endpoint::kChatCompletions;
  auto builder = std::make_shared<ResponseBuilder>(call->job, *context.engine->session().tokenizer, context.model_name,
                                                   new_response_id(chat ? "chatcmpl" : "cmpl"), unix_seconds());

  if (!call->job.stream) {
    OutputMux mux(call->streams);
    while (auto item = mux.next()) {
      auto& [prompt, out] = *item;
      for (const CompletionDelta& d : out.deltas) builder->add(prompt, d);
      call->usage[static_cast<std::size_t>(prompt)] = out.usage;
      if (!out.error.empty()) call->error = out.error;
    }
    call->record(*builder);
    if (!call->error.empty()) throw ApiError(400, call->error);
    res.set_content(dump(builder->response(call->total_usage())), "application/json");
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [call, builder](std::size_t, httplib::DataSink& sink) {
        // Nothing may escape into the library, which runs this outside any try.
        try {
          return stream_events(*call, *builder, sink);
        } catch (const std::exception& e) {
          const std::string event = "data: " + error_body(500, std::string("internal error: ") + e.what()) + "\n\n";
          sink.write(event.data(), event.size());
          return false;
        }
      },
      [call](bool) {});
}

}  // namespace folio::server
