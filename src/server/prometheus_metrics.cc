#include "server/prometheus_metrics.h"

#include <fmt/format.h>

namespace folio::server {
namespace {

// Label values escape backslash, quote and newline.
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Prometheus floats: integers without a fraction, the rest round-trippable.
std::string number(double v) { return fmt::format("{}", v); }

class Writer {
 public:
  explicit Writer(const std::string& model) : labels_(fmt::format("model_name=\"{}\"", escape_label(model))) {}

  void family(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, double value, const std::string& extra_labels = "") {
    out_ += fmt::format("{}{{{}{}}} {}\n", name, labels_, extra_labels.empty() ? "" : "," + extra_labels, number(value));
  }
  void gauge(const char* name, const char* help, double value) {
    family(name, "gauge", help);
    sample(name, value);
  }
  void counter(const char* name, const char* help, double value) {
    family(name, "counter", help);
    sample(name, value);
  }
  void histogram(const char* name, const char* help, const Histogram& h) {
    family(name, "histogram", help);
    std::uint64_t cumulative = 0;
    const std::string bucket = std::string(name) + "_bucket";
    for (std::size_t i = 0; i < h.bounds().size(); ++i) {
      cumulative += h.counts()[i];
      sample(bucket, static_cast<double>(cumulative), fmt::format("le=\"{}\"", number(h.bounds()[i])));
    }
    sample(bucket, static_cast<double>(h.count()), "le=\"+Inf\"");
    sample(std::string(name) + "_sum", h.sum());
    sample(std::string(name) + "_count", static_cast<double>(h.count()));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string labels_;
  std::string out_;
};

}  // namespace

std::string prometheus_metrics(const EngineStats* stats, const ServerCounters& counters, const HttpServer::Stats* http,
                               const std::string& model_name) {
  Writer w(model_name);
  if (stats != nullptr) {
    const EngineStats& s = *stats;
    w.gauge("folio:num_requests_running", "Sequences in the running batch.", s.num_running);
    w.gauge("folio:num_requests_waiting", "Sequences waiting to be scheduled.", s.num_waiting);
    const double usage = s.kv.num_blocks == 0 ? 0.0 : static_cast<double>(s.kv.num_used_blocks) / s.kv.num_blocks;
    w.gauge("folio:kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).", usage);
    w.gauge("folio:kv_cache_blocks_used", "KV cache blocks referenced by running sequences.", s.kv.num_used_blocks);
    w.gauge("folio:kv_cache_blocks_total", "KV cache blocks in the pool.", s.kv.num_blocks);
    w.gauge("folio:kv_cache_bytes", "Bytes of the KV cache pool: K and V of every layer, codes and scales.",
            static_cast<double>(s.kv_bytes));
    w.counter("folio:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
              static_cast<double>(s.prefix_cache.num_queried_tokens));
    w.counter("folio:prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
              static_cast<double>(s.prefix_cache.num_hit_tokens));
    w.counter("folio:num_preemptions_total", "Sequences preempted (recomputed later) for want of KV blocks.",
              static_cast<double>(s.num_preemptions));
    w.counter("folio:prompt_tokens_total", "Prompt tokens of admitted requests.", static_cast<double>(s.prompt_tokens));
    w.counter("folio:generation_tokens_total", "Tokens generated.", static_cast<double>(s.generation_tokens));
    w.counter("folio:spec_decode_num_drafts_total", "Decode steps of sequences that speculated.",
              static_cast<double>(s.spec_steps));
    w.counter("folio:spec_decode_num_draft_tokens_total", "Tokens proposed by speculative decoding.",
              static_cast<double>(s.spec_proposed_tokens));
    w.counter("folio:spec_decode_num_accepted_tokens_total", "Proposed tokens the target accepted.",
              static_cast<double>(s.spec_accepted_tokens));
    w.gauge("folio:spec_decode_acceptance_rate", "Accepted / proposed tokens since start (0 when none proposed).",
            s.spec_proposed_tokens ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_proposed_tokens) : 0.0);
    w.gauge("folio:spec_decode_mean_accepted_length", "Tokens emitted per speculating step: accepted + 1, averaged.",
            s.spec_steps ? 1.0 + static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_steps) : 0.0);
    w.histogram("folio:time_to_first_token_seconds", "Time from arrival to the first generated token.",
                s.time_to_first_token);
    w.histogram("folio:inter_token_latency_seconds", "Time between consecutive outputs of a request.",
                s.inter_token_latency);
    w.histogram("folio:e2e_request_latency_seconds", "Time from arrival to the last token.", s.e2e_latency);
    w.histogram("folio:request_queue_time_seconds", "Time from arrival to the first scheduled step.", s.queue_time);
  }
  w.family("folio:request_success_total", "counter", "Finished completions (choices) by finish reason.");
  auto finished = counters.finished();
  for (const char* reason : {"stop", "length", "abort"}) finished.try_emplace(reason, 0);
  for (const auto& [reason, count] : finished)
    w.sample("folio:request_success_total", static_cast<double>(count),
             fmt::format("finished_reason=\"{}\"", escape_label(reason)));
  w.family("folio:http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, count] : counters.statuses())
    w.sample("folio:http_responses_total", static_cast<double>(count), fmt::format("status=\"{}\"", status));
  if (http != nullptr) {
    w.gauge("folio:http_connections", "Client connections open.", http->num_connections);
    w.gauge("folio:http_idle_connections", "Keep-alive connections waiting for a request.", http->num_idle_connections);
    w.counter("folio:http_connections_refused_total",
              "Connections refused on arrival (over --max-connections or --max-connections-per-client).",
              static_cast<double>(http->num_refused_connections));
    w.counter("folio:http_idle_connections_closed_total", "Idle keep-alive connections closed to make room.",
              static_cast<double>(http->num_evicted_idle));
    w.gauge("folio:http_pending_body_bytes", "Request body bytes being read or parsed.",
            static_cast<double>(http->pending_body_bytes));
    w.gauge("folio:http_worker_threads", "Threads started for request handlers.", http->num_workers);
  }
  return w.take();
}

}  // namespace folio::server
