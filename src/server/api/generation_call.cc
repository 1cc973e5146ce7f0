#include "server/api/generation_call.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <utility>

#include "server/api/api_error.h"
#include "server/api/openai_response.h"
#include "server/api/unix_time.h"

namespace folio::server {
namespace {

ApiError refusal(const EngineError& e) {
  switch (e.kind()) {
    case EngineError::Kind::kBusy:
      return ApiError(429, e.what(), "", "rate_limit_exceeded");
    case EngineError::Kind::kDraining:
      return ApiError(503, e.what());
    case EngineError::Kind::kInvalid:
      break;
  }
  return ApiError(400, e.what());
}

void append_event(std::string& out, const Json& j) {
  out += "data: ";
  out += dump_json(j);
  out += "\n\n";
}

// Takes outputs from several engine streams (one per prompt) as they come,
// in turn, sleeping while none has any.
class OutputMux {
 public:
  explicit OutputMux(const std::vector<std::shared_ptr<RequestStream>>& streams)
      : streams_(streams), ended_(streams.size(), false), signal_(std::make_shared<OutputSignal>()) {
    if (streams_.size() > 1)
      for (const auto& s : streams_) s->attach(signal_);
  }

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
      // Read the count before looking, so that a push during the sweep is
      // not slept through.
      const std::uint64_t seen = signal_->generation();
      for (std::size_t k = 0; k < streams_.size(); ++k) {
        const std::size_t i = (cursor_ + k) % streams_.size();
        if (ended_[i]) continue;
        if (auto out = take(static_cast<int>(i), milliseconds(0))) {
          cursor_ = i + 1;
          return out;
        }
      }
      signal_->wait_past(seen);
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
  std::shared_ptr<OutputSignal> signal_;
  std::size_t cursor_ = 0;
};

// One job in flight. Destroyed when the answer is written or abandoned: it
// then aborts whatever still runs (a no-op for finished requests).
struct Call {
  GenerationContext context;
  GenerationJob job;
  std::vector<std::shared_ptr<RequestStream>> streams;  // [num_prompts]
  std::vector<Usage> usage;                             // [num_prompts]
  std::string error;                                    // an engine-side failure

  ~Call() { abort_unfinished(); }

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

  void record(const AnswerShape& shape, HttpExchange& exchange) const {
    const Usage t = total_usage();
    exchange.note(fmt::format("{} + {} tokens", t.prompt_tokens, t.completion_tokens));
    for (const std::string& reason : shape.finish_reasons())
      context.counters->count_finish(reason.empty() ? "abort" : reason);
  }
};

// Writes the job's events as they come, until the end or the client is gone.
void stream_events(Call& call, AnswerShape& shape, HttpExchange& exchange) {
  auto send = [&](std::string events) {
    if (events.empty() || exchange.write(std::move(events))) return true;
    call.abort_unfinished();
    return false;
  };
  if (!send(shape.opening_events())) return call.record(shape, exchange);
  OutputMux mux(call.streams);
  while (auto item = mux.next()) {
    auto& [prompt, out] = *item;
    std::string events;
    for (const CompletionDelta& d : out.deltas) events += shape.delta_events(prompt, d);
    call.usage[static_cast<std::size_t>(prompt)] = out.usage;
    if (!out.error.empty()) events += shape.error_event(400, out.error);
    if (!send(std::move(events))) return call.record(shape, exchange);
  }
  call.record(shape, exchange);
  if (send(shape.closing_events(call.total_usage()))) exchange.end_stream();
}

// OpenAI's chat completions and completions.
class OpenAiShape final : public AnswerShape {
 public:
  OpenAiShape(const GenerationJob& job, const Tokenizer& tokenizer, const GenerationContext& context)
      : job_(job),
        builder_(job, tokenizer, context.model_name,
                 new_response_id(job.endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-"), unix_seconds(),
                 context.system_fingerprint) {}

  std::string opening_events() override {
    std::string out;
    for (const Json& c : builder_.opening_chunks()) append_event(out, c);
    return out;
  }
  std::string delta_events(int prompt, const CompletionDelta& delta) override {
    std::string out;
    Json c = builder_.chunk(prompt, delta);
    if (!c.is_null()) append_event(out, c);
    return out;
  }
  std::string error_event(int status, const std::string& message) override {
    return "data: " + error_body(status, message) + "\n\n";
  }
  std::string closing_events(const Usage& usage) override {
    std::string out;
    if (job_.include_usage) append_event(out, builder_.usage_chunk(usage));
    return out + "data: [DONE]\n\n";
  }
  void add(int prompt, const CompletionDelta& delta) override { builder_.add(prompt, delta); }
  void add_prompt_logprobs(int prompt, std::span<const PromptTokenLogprob> logprobs) override {
    builder_.add_prompt_logprobs(prompt, logprobs);
  }
  std::string response(const Usage& usage) override { return dump_json(builder_.response(usage)); }
  std::vector<std::string> finish_reasons() const override { return builder_.finish_reasons(); }

 private:
  const GenerationJob& job_;
  ResponseBuilder builder_;
};

}  // namespace

void run_generation(const GenerationContext& context, GenerationJob job, HttpExchange& exchange,
                    const ShapeMaker& shape) {
  Call call;
  call.context = context;
  call.job = std::move(job);
  call.usage.resize(call.job.prompts.size());
  // Made while the job still holds its prompts (they move to the engine).
  const Tokenizer& tokenizer = *context.engine->session().tokenizer;
  std::unique_ptr<AnswerShape> answer =
      shape ? shape(call.job, tokenizer, context) : std::make_unique<OpenAiShape>(call.job, tokenizer, context);
  for (auto& prompt : call.job.prompts) {
    EngineRequest request;
    request.prompt = std::move(prompt);
    request.params = call.job.params;
    request.speculative = call.job.speculative;
    request.priority = call.job.priority;
    request.cache_salt = call.job.cache_salt;
    try {
      call.streams.push_back(context.engine->submit(std::move(request)));
    } catch (const EngineError& e) {
      throw refusal(e);  // ~Call aborts the prompts already submitted
    }
  }
  std::vector<std::uint64_t> ids;
  for (const auto& s : call.streams) ids.push_back(s->id());
  exchange.on_gone([engine = context.engine, ids] {
    for (std::uint64_t id : ids) engine->abort(id);
  });

  if (call.job.stream) {
    exchange.begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
    try {
      stream_events(call, *answer, exchange);
    } catch (const std::exception& e) {
      // The header is out: the failure can only be told as one more event.
      exchange.write(answer->error_event(500, std::string("internal error: ") + e.what()));
      exchange.end_stream();
    }
    return;
  }
  OutputMux mux(call.streams);
  while (auto item = mux.next()) {
    auto& [prompt, out] = *item;
    if (!out.prompt_logprobs.empty()) answer->add_prompt_logprobs(prompt, out.prompt_logprobs);
    for (const CompletionDelta& d : out.deltas) answer->add(prompt, d);
    call.usage[static_cast<std::size_t>(prompt)] = out.usage;
    if (!out.error.empty()) call.error = out.error;
  }
  call.record(*answer, exchange);
  if (!call.error.empty()) throw ApiError(400, call.error);
  HttpResponse response;
  response.body = answer->response(call.total_usage());
  exchange.respond(std::move(response));
}

}  // namespace folio::server
