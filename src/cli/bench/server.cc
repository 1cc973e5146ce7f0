#include "cli/bench/server.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/bench/dispatcher.h"
#include "cli/bench/http_client.h"
#include "core/error.h"

namespace folio::cli {
namespace {

using Json = nlohmann::json;

// Reads one streamed response: server-sent events, one JSON chunk each, then
// "data: [DONE]". Each chunk with text counts as one token event; the usage
// chunk gives the true token count, which fills in chunks that held several.
class EventReader {
 public:
  EventReader(BenchClock::time_point start, RequestTiming& timing, BenchProgress& progress)
      : start_(start), timing_(timing), progress_(progress) {}

  void feed(const char* data, std::size_t size) {
    buffer_.append(data, size);
    for (std::size_t end; (end = buffer_.find("\n\n")) != std::string::npos;) {
      event(buffer_.substr(0, end));
      buffer_.erase(0, end + 2);
    }
  }

  void finish() {
    if (usage_tokens_ > timing_.output_tokens && !timing_.event_tokens.empty()) {
      const int missing = usage_tokens_ - timing_.output_tokens;
      timing_.event_tokens.back() += missing;
      timing_.output_tokens += missing;
      progress_.add_tokens(missing);
    }
    if (!done_ && timing_.error.empty()) timing_.error = "the stream ended without data: [DONE]";
  }

 private:
  void event(const std::string& text) {
    for (std::size_t pos = 0; pos < text.size();) {
      std::size_t eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      std::string_view line(text.data() + pos, eol - pos);
      pos = eol + 1;
      if (!line.starts_with("data:")) continue;
      line.remove_prefix(5);
      while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (line == "[DONE]") {
        done_ = true;
        continue;
      }
      data(Json::parse(line));
    }
  }

  void data(const Json& chunk) {
    if (chunk.contains("error")) {
      timing_.error = chunk["error"].is_object() ? chunk["error"].value("message", chunk["error"].dump())
                                                 : chunk["error"].dump();
      return;
    }
    if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object())
      usage_tokens_ = u->value("completion_tokens", 0);
    auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array()) return;
    for (const Json& c : *choices) {
      auto t = c.find("text");
      if (t == c.end() || !t->is_string() || t->get_ref<const std::string&>().empty()) continue;
      const double now = seconds_since(start_);
      timing_.event_times_s.push_back(now);
      timing_.event_tokens.push_back(1);
      ++timing_.output_tokens;
      timing_.finish_s = now;
      progress_.add_tokens(1);
    }
  }

  BenchClock::time_point start_;
  RequestTiming& timing_;
  BenchProgress& progress_;
  std::string buffer_;
  int usage_tokens_ = 0;
  bool done_ = false;
};

}  // namespace

RunTimings run_server(const ServerTarget& target, const BenchWorkload& workload, int max_concurrency,
                      BenchProgress& progress) {
  Json response_format;
  if (!target.json_schema.empty())
    response_format = {{"type", "json_schema"},
                       {"json_schema", {{"name", "bench"}, {"strict", true}, {"schema", Json::parse(target.json_schema)}}}};
  return dispatch_requests(workload, max_concurrency,
                           [&](const BenchRequest& request, BenchClock::time_point start, RequestTiming& timing) {
    Json body{{"prompt", request.prompt},
              {"max_tokens", request.output_len},
              {"temperature", 0},
              {"ignore_eos", request.ignore_eos},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}}};
    if (!target.model_name.empty()) body["model"] = target.model_name;
    if (!request.speculative) body["speculative"] = false;  // folio's per-request switch
    if (request.constrained && !response_format.is_null()) body["response_format"] = response_format;
    std::vector<std::pair<std::string, std::string>> headers = {{"Content-Type", "application/json"},
                                                                {"Accept", "text/event-stream"}};
    if (!target.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + target.api_key);
    EventReader reader(start, timing, progress);
    std::string error_body;
    const HttpResult result = http_exchange(target.url, "POST", "/v1/completions", headers, body.dump(),
                                            target.timeout_s, [&](int status, std::string_view bytes) {
                                              if (status == 200) {
                                                reader.feed(bytes.data(), bytes.size());
                                              } else {
                                                error_body.append(bytes);
                                              }
                                            });
    if (result.status == 0) {
      timing.error = result.error;
    } else if (result.status != 200) {
      timing.error = fmt::format("HTTP {}: {}", result.status, error_body.substr(0, 300));
    } else if (!result.error.empty()) {
      timing.error = result.error;
    } else {
      reader.finish();
    }
    progress.request_done();
  });
}

std::map<std::string, double> scrape_metrics(const ServerTarget& target) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!target.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + target.api_key);
  std::map<std::string, double> samples;
  std::string text;
  const HttpResult result = http_exchange(target.url, "GET", "/metrics", headers, "", 10,
                                          [&](int, std::string_view bytes) { text.append(bytes); });
  if (result.status != 200 || !result.error.empty()) return samples;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    // name{labels} value: the labels are dropped and samples of one name summed.
    const std::size_t name_end = line.find_first_of("{ ");
    const std::size_t space = line.rfind(' ');
    if (name_end == std::string::npos || space == std::string::npos || space < name_end) continue;
    try {
      samples[line.substr(0, name_end)] += std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
      // not a number: not a sample we read
    }
  }
  return samples;
}

}  // namespace folio::cli
