// ApiServer's cascade route (server/cascade.h): the small model answers
// whole, its confidence decides, and the client gets that answer (streamed
// in one delta when it asked for a stream) or the large model's, streamed
// live when asked.
#include <fmt/format.h>

#include <algorithm>

#include "server/api/api_error.h"
#include "server/api_server.h"
#include "server/cascade.h"
#include "server/exchange_wrappers.h"

namespace folio::server {

const CascadeSpec* ApiServer::cascade_named(const std::optional<std::string>& name) const {
  if (!name) return nullptr;
  for (const CascadeSpec& c : options_.cascades)
    if (c.name == *name) return &c;
  return nullptr;
}

Json ApiServer::cascade_answers() const {
  Json out = Json::array();
  std::lock_guard lock(mutex_);
  for (const CascadeSpec& c : options_.cascades) {
    const auto count = [&](const char* by) {
      const auto it = cascade_answers_.find({c.name, by});
      return it == cascade_answers_.end() ? std::int64_t{0} : it->second;
    };
    out.push_back(Json{{"name", c.name},
                       {"small", c.small},
                       {"large", c.large},
                       {"answered_small", count("small")},
                       {"answered_large", count("large")}});
  }
  return out;
}

void ApiServer::run_cascade(const HttpRequest& req, HttpExchange& ex, const Json& body, ChatRequest chat,
                            const CascadeSpec& cascade, const ShapeMaker& shape) {
  if (shape)
    throw ApiError(400, fmt::format("`{}` is a cascade, which answers POST /v1/chat/completions only", cascade.name),
                   "model");
  if (chat.fields.sampling.n != 1)
    throw ApiError(400, fmt::format("`{}` is a cascade, which gives one answer per request (n = 1)", cascade.name),
                   "n");
  double threshold = cascade.threshold;
  if (const Json* t = field_of(body, "cascade_threshold")) {
    if (!t->is_number()) bad_request("cascade_threshold", "cascade_threshold must be a number");
    threshold = t->get<double>();
  }
  const bool asked_logprobs = chat.logprobs;
  const int asked_top = chat.fields.sampling.logprobs.value_or(0);

  ChatRequest first = chat;
  first.fields.model = cascade.small;
  first.fields.stream = false;  // read whole before anything is sent
  first.fields.include_usage = false;
  first.logprobs = true;
  first.fields.sampling.logprobs = std::max(asked_top, 2);
  auto small = served(cascade.small, /*for_work=*/true);
  CapturingExchange captured(ex);
  run_job(req, captured, *small, make_chat_job(std::move(first), small->context), {});
  HttpResponse& answer = captured.response();
  if (answer.status != 200) return ex.respond(std::move(answer));  // the small model's refusal is the answer

  Json response = parse_json_object(answer.body);
  const double confidence = answer_confidence(response, cascade.measure);
  const bool escalate = !(confidence >= threshold);
  {
    std::lock_guard lock(mutex_);
    ++cascade_answers_[{cascade.name, escalate ? "large" : "small"}];
  }
  HttpFields fields = {{"X-Folio-Cascade", escalate ? "large" : "small"},
                       {"X-Folio-Cascade-Confidence", fmt::format("{:.6f}", confidence)}};
  // The request log's note: which answered, and why (after the run, whose own note it replaces).
  const std::string note = fmt::format("cascade {}: {} ({} {:.4f} vs {:.4f})", cascade.name,
                                       escalate ? "large" : "small", cascade_measure_name(cascade.measure),
                                       confidence, threshold);
  if (!escalate) {
    ex.note(note);
    trim_logprobs(response, asked_logprobs, asked_top);
    if (chat.fields.stream) {
      // The answer is whole already: told as a stream in one delta.
      fields.insert(fields.begin(), {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
      ex.begin_stream(200, "text/event-stream", fields);
      ex.write(stream_events_of(response, chat.fields.include_usage));
      return ex.end_stream();
    }
    answer.body = dump_json(response);
    answer.fields.insert(answer.fields.end(), fields.begin(), fields.end());
    return ex.respond(std::move(answer));
  }
  // The large model answers as the client asked, streamed as it is written.
  chat.fields.model = cascade.large;
  auto large = served(cascade.large, /*for_work=*/true);
  FieldsExchange with_fields(ex, std::move(fields));
  run_job(req, with_fields, *large, make_chat_job(std::move(chat), large->context), {});
  ex.note(note);
}

}  // namespace folio::server
