#include "cli/bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace folio::cli {
namespace {

using Json = nlohmann::ordered_json;

LatencyStats stats_ms(std::vector<double> seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  for (double& v : seconds) v *= 1000.0;
  double sum = 0;
  for (double v : seconds) sum += v;
  s.mean = sum / static_cast<double>(seconds.size());
  std::sort(seconds.begin(), seconds.end());
  s.p50 = percentile(seconds, 50);
  s.p90 = percentile(seconds, 90);
  s.p99 = percentile(seconds, 99);
  return s;
}

Json to_json(const LatencyStats& s) { return Json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}}; }

// One figure of a summary, for tables and comparisons.
struct Metric {
  const char* key;
  const char* label;
  bool higher_is_better;
  double (*get)(const BenchSummary&);
};

const Metric kMetrics[] = {
    {"request_throughput", "Requests/s", true, [](const BenchSummary& s) { return s.request_throughput; }},
    {"output_throughput", "Output tokens/s", true, [](const BenchSummary& s) { return s.output_throughput; }},
    {"total_throughput", "Total tokens/s", true, [](const BenchSummary& s) { return s.total_throughput; }},
    {"decode_throughput", "Decode tokens/s (all running)", true, [](const BenchSummary& s) { return s.decode_throughput; }},
    {"ttft_p50_ms", "TTFT p50 (ms)", false, [](const BenchSummary& s) { return s.ttft_ms.p50; }},
    {"ttft_p99_ms", "TTFT p99 (ms)", false, [](const BenchSummary& s) { return s.ttft_ms.p99; }},
    {"tpot_p50_ms", "TPOT p50 (ms)", false, [](const BenchSummary& s) { return s.tpot_ms.p50; }},
    {"tpot_p99_ms", "TPOT p99 (ms)", false, [](const BenchSummary& s) { return s.tpot_ms.p99; }},
    {"itl_p50_ms", "ITL p50 (ms)", false, [](const BenchSummary& s) { return s.itl_ms.p50; }},
    {"itl_p99_ms", "ITL p99 (ms)", false, [](const BenchSummary& s) { return s.itl_ms.p99; }},
    {"e2e_p50_ms", "E2E p50 (ms)", false, [](const BenchSummary& s) { return s.e2e_ms.p50; }},
    {"e2e_p99_ms", "E2E p99 (ms)", false, [](const BenchSummary& s) { return s.e2e_ms.p99; }},
};

double ratio(double a, double b) { return b > 0 ? a / b : std::numeric_limits<double>::quiet_NaN(); }

template <typename F>
std::vector<double> collect(const std::vector<BenchSummary>& runs, F get) {
  std::vector<double> v;
  for (const BenchSummary& s : runs) v.push_back(get(s));
  return v;
}

// Per repetition folio / peer, then the median: pairs share the machine's
// noise of their moment, so their ratios are steadier than ratios of medians.
double median_ratio(const Comparison& c, const Metric& m) {
  std::vector<double> r;
  for (std::size_t i = 0; i < c.folio.size() && i < c.peer.size(); ++i) {
    const double x = ratio(m.get(c.folio[i]), m.get(c.peer[i]));
    if (!std::isnan(x)) r.push_back(x);
  }
  return r.empty() ? std::numeric_limits<double>::quiet_NaN() : median(r);
}

}  // namespace

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

double median(std::vector<double> values) { return percentile(std::move(values), 50); }

BenchSummary summarize(const RunTimings& run) {
  BenchSummary s;
  s.duration_s = run.duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  double all_started = 0;  // every request has its first token
  double first_finish = std::numeric_limits<double>::infinity();
  for (const RequestTiming& r : run.requests) {
    ++s.num_requests;
    if (!r.error.empty() || r.event_times_s.empty()) {
      ++s.num_failed;
      continue;
    }
    s.prompt_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    const double first = r.event_times_s.front();
    ttft.push_back(first - r.submit_s);
    e2e.push_back(r.finish_s - r.submit_s);
    if (r.output_tokens > 1) tpot.push_back((r.finish_s - first) / (r.output_tokens - 1));
    for (std::size_t i = 1; i < r.event_times_s.size(); ++i) itl.push_back(r.event_times_s[i] - r.event_times_s[i - 1]);
    all_started = std::max(all_started, first);
    first_finish = std::min(first_finish, r.finish_s);
  }
  const int ok = s.num_requests - s.num_failed;
  if (s.duration_s > 0) {
    s.request_throughput = ok / s.duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / s.duration_s;
    s.total_throughput = static_cast<double>(s.prompt_tokens + s.output_tokens) / s.duration_s;
  }
  // The window where every request is decoding: after the last first token,
  // up to the first finish. Events of the steps at either edge fall on both
  // sides of it by a few microseconds; the two edges' errors cancel.
  if (ok > 0 && first_finish > all_started) {
    std::int64_t tokens = 0;
    for (const RequestTiming& r : run.requests) {
      if (!r.error.empty()) continue;
      for (std::size_t i = 0; i < r.event_times_s.size(); ++i)
        if (r.event_times_s[i] > all_started && r.event_times_s[i] <= first_finish) tokens += r.event_tokens[i];
    }
    s.decode_throughput = static_cast<double>(tokens) / (first_finish - all_started);
  }
  s.ttft_ms = stats_ms(std::move(ttft));
  s.tpot_ms = stats_ms(std::move(tpot));
  s.itl_ms = stats_ms(std::move(itl));
  s.e2e_ms = stats_ms(std::move(e2e));
  return s;
}

BenchSummary median_summary(const std::vector<BenchSummary>& runs) {
  if (runs.empty()) return {};
  auto med = [&runs](auto field) {
    std::vector<double> v;
    for (const BenchSummary& s : runs) v.push_back(static_cast<double>(field(s)));
    return median(std::move(v));
  };
  auto med_latency = [&](auto field) {
    LatencyStats l;
    l.mean = med([&](const BenchSummary& s) { return field(s).mean; });
    l.p50 = med([&](const BenchSummary& s) { return field(s).p50; });
    l.p90 = med([&](const BenchSummary& s) { return field(s).p90; });
    l.p99 = med([&](const BenchSummary& s) { return field(s).p99; });
    return l;
  };
  BenchSummary m = runs.front();  // counts are the same in every repetition
  m.num_failed = static_cast<int>(med([](const BenchSummary& s) { return s.num_failed; }));
  m.duration_s = med([](const BenchSummary& s) { return s.duration_s; });
  m.request_throughput = med([](const BenchSummary& s) { return s.request_throughput; });
  m.output_throughput = med([](const BenchSummary& s) { return s.output_throughput; });
  m.total_throughput = med([](const BenchSummary& s) { return s.total_throughput; });
  m.decode_throughput = med([](const BenchSummary& s) { return s.decode_throughput; });
  m.ttft_ms = med_latency([](const BenchSummary& s) -> const LatencyStats& { return s.ttft_ms; });
  m.tpot_ms = med_latency([](const BenchSummary& s) -> const LatencyStats& { return s.tpot_ms; });
  m.itl_ms = med_latency([](const BenchSummary& s) -> const LatencyStats& { return s.itl_ms; });
  m.e2e_ms = med_latency([](const BenchSummary& s) -> const LatencyStats& { return s.e2e_ms; });
  return m;
}

nlohmann::ordered_json to_json(const BenchSummary& s) {
  return Json{{"num_requests", s.num_requests},
              {"num_failed", s.num_failed},
              {"duration_s", s.duration_s},
              {"prompt_tokens", s.prompt_tokens},
              {"output_tokens", s.output_tokens},
              {"request_throughput", s.request_throughput},
              {"output_throughput", s.output_throughput},
              {"total_throughput", s.total_throughput},
              {"decode_throughput", s.decode_throughput},
              {"ttft_ms", to_json(s.ttft_ms)},
              {"tpot_ms", to_json(s.tpot_ms)},
              {"itl_ms", to_json(s.itl_ms)},
              {"e2e_ms", to_json(s.e2e_ms)}};
}

nlohmann::ordered_json to_json(const RunTimings& run) {
  Json requests = Json::array();
  for (const RequestTiming& r : run.requests) {
    Json j{{"arrival_s", r.arrival_s},           {"submit_s", r.submit_s},
           {"event_times_s", r.event_times_s},   {"event_tokens", r.event_tokens},
           {"finish_s", r.finish_s},             {"prompt_tokens", r.prompt_tokens},
           {"output_tokens", r.output_tokens},   {"output_ids", r.output_ids}};
    if (!r.error.empty()) j["error"] = r.error;
    requests.push_back(std::move(j));
  }
  return Json{{"duration_s", run.duration_s}, {"requests", std::move(requests)}};
}

RunTimings timings_from_json(const nlohmann::json& j) {
  RunTimings run;
  run.duration_s = j.at("duration_s").get<double>();
  for (const auto& r : j.at("requests")) {
    RequestTiming t;
    t.arrival_s = r.value("arrival_s", 0.0);
    t.submit_s = r.value("submit_s", 0.0);
    t.event_times_s = r.at("event_times_s").get<std::vector<double>>();
    t.event_tokens = r.at("event_tokens").get<std::vector<int>>();
    t.finish_s = r.value("finish_s", 0.0);
    t.prompt_tokens = r.value("prompt_tokens", 0);
    t.output_tokens = r.value("output_tokens", 0);
    if (r.contains("output_ids")) t.output_ids = r.at("output_ids").get<std::vector<TokenId>>();
    t.error = r.value("error", std::string());
    run.requests.push_back(std::move(t));
  }
  return run;
}

std::string format_summary(const std::string& title, const BenchSummary& s) {
  std::string out;
  auto line = [&out](const std::string& label, const std::string& value) {
    out += fmt::format("{:<42}{:>12}\n", label, value);
  };
  auto rule = [&out](const std::string& name) { out += fmt::format("{:-^54}\n", name.empty() ? "" : " " + name + " "); };
  auto latency = [&](const char* name, const char* abbrev, const LatencyStats& l) {
    rule(name);
    line(fmt::format("Mean {} (ms):", abbrev), fmt::format("{:.2f}", l.mean));
    line(fmt::format("Median {} (ms):", abbrev), fmt::format("{:.2f}", l.p50));
    line(fmt::format("P90 {} (ms):", abbrev), fmt::format("{:.2f}", l.p90));
    line(fmt::format("P99 {} (ms):", abbrev), fmt::format("{:.2f}", l.p99));
  };
  out += fmt::format("{:=^54}\n", " " + title + " ");
  line("Successful requests:", fmt::format("{}", s.num_requests - s.num_failed));
  if (s.num_failed > 0) line("Failed requests:", fmt::format("{}", s.num_failed));
  line("Benchmark duration (s):", fmt::format("{:.2f}", s.duration_s));
  line("Total input tokens:", fmt::format("{}", s.prompt_tokens));
  line("Total generated tokens:", fmt::format("{}", s.output_tokens));
  line("Request throughput (req/s):", fmt::format("{:.2f}", s.request_throughput));
  line("Output token throughput (tok/s):", fmt::format("{:.2f}", s.output_throughput));
  line("Total token throughput (tok/s):", fmt::format("{:.2f}", s.total_throughput));
  // No window where every request decodes at once (staggered arrivals): n/a.
  line("Decode throughput, all running (tok/s):", s.decode_throughput > 0 ? fmt::format("{:.2f}", s.decode_throughput) : "n/a");
  latency("Time to First Token", "TTFT", s.ttft_ms);
  latency("Time per Output Token (excl. 1st token)", "TPOT", s.tpot_ms);
  latency("Inter-token Latency", "ITL", s.itl_ms);
  latency("End-to-end Latency", "E2E", s.e2e_ms);
  rule("");
  return out;
}

std::string format_comparison(const Comparison& c) {
  std::string out = fmt::format("{:<32}{:>14}{:>14}{:>16}\n", "median of " + std::to_string(c.folio.size()) + " runs",
                                c.folio_name, c.peer_name, c.folio_name + "/" + c.peer_name);
  for (const Metric& m : kMetrics) {
    const double f = median(collect(c.folio, m.get)), p = median(collect(c.peer, m.get));
    out += fmt::format("{:<32}{:>14.2f}{:>14.2f}{:>15.3f}{}\n", m.label, f, p, median_ratio(c, m),
                       m.higher_is_better ? "+" : "-");
  }
  out += fmt::format("(ratios: median over runs of {} / {} in the same run; + higher is better, - lower is better)\n",
                     c.folio_name, c.peer_name);
  if (c.compared_outputs > 0)
    out += fmt::format("greedy outputs of {} identical to {}: {} of {} requests; {:.1f}% of output tokens before the first "
                       "difference\n",
                       c.folio_name, c.peer_name, c.identical_outputs, c.compared_outputs,
                       100.0 * static_cast<double>(c.common_prefix_tokens) /
                           static_cast<double>(std::max<std::int64_t>(1, c.compared_tokens)));
  return out;
}

nlohmann::ordered_json to_json(const Comparison& c) {
  Json medians = Json::object();
  for (const Metric& m : kMetrics) {
    const double r = median_ratio(c, m);
    medians[m.key] = Json{{"folio", median(collect(c.folio, m.get))},
                          {"peer", median(collect(c.peer, m.get))},
                          {"ratio", std::isnan(r) ? Json(nullptr) : Json(r)}};
  }
  Json folio_runs = Json::array(), peer_runs = Json::array();
  for (const BenchSummary& s : c.folio) folio_runs.push_back(to_json(s));
  for (const BenchSummary& s : c.peer) peer_runs.push_back(to_json(s));
  return Json{{"peer", c.peer_name},
              {"repetitions", c.folio.size()},
              {"median", std::move(medians)},
              {"identical_outputs", c.identical_outputs},
              {"compared_outputs", c.compared_outputs},
              {"common_prefix_tokens", c.common_prefix_tokens},
              {"compared_tokens", c.compared_tokens},
              {"folio_runs", std::move(folio_runs)},
              {"peer_runs", std::move(peer_runs)}};
}

}  // namespace folio::cli
