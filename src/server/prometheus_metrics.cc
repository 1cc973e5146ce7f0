#include "server/prometheus_metrics.h"

#include <fmt/format.h>

#include <map>

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

// Samples grouped by family: a family written for a second model gets its
// samples under the first one's HELP and TYPE, as the format requires.
class Writer {
 public:
  void set_model(const std::string& model) { labels_ = fmt::format("model_name=\"{}\"", escape_label(model)); }

  void family(const std::string& name, const char* type, const char* help) {
    for (std::size_t i = 0; i < families_.size(); ++i)
      if (families_[i].name == name) {
        current_ = i;
        return;
      }
    families_.push_back({name, fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type), ""});
    current_ = families_.size() - 1;
  }
  void sample(const std::string& name, double value, const std::string& extra_labels = "") {
    families_[current_].samples +=
        fmt::format("{}{{{}{}}} {}\n", name, labels_, extra_labels.empty() ? "" : "," + extra_labels, number(value));
  }
  void gauge(const std::string& name, const char* help, double value) {
    family(name, "gauge", help);
    sample(name, value);
  }
  void counter(const std::string& name, const char* help, double value) {
    family(name, "counter", help);
    sample(name, value);
  }
  void histogram(const std::string& name, const char* help, const Histogram& h) {
    family(name, "histogram", help);
    std::uint64_t cumulative = 0;
    const std::string bucket = name + "_bucket";
    for (std::size_t i = 0; i < h.bounds().size(); ++i) {
      cumulative += h.counts()[i];
      sample(bucket, static_cast<double>(cumulative), fmt::format("le=\"{}\"", number(h.bounds()[i])));
    }
    sample(bucket, static_cast<double>(h.count()), "le=\"+Inf\"");
    sample(name + "_sum", h.sum());
    sample(name + "_count", static_cast<double>(h.count()));
  }
  std::string take() const {
    std::string out;
    for (const Family& f : families_) out += f.head + f.samples;
    return out;
  }

 private:
  struct Family {
    std::string name;
    std::string head;  // HELP and TYPE
    std::string samples;
  };
  std::string labels_;
  std::vector<Family> families_;  // in the order first written
  std::size_t current_ = 0;
};

// The families vLLM also has, under its names: written once with folio's
// prefix and once with vLLM's, so that a router or a dashboard configured
// for vLLM (the Gateway API Inference Extension, llm-d) reads folio as is.
void write_shared(Writer& w, const std::string& p, const EngineStats* stats, const ServerCounters* counters) {
  if (stats != nullptr) {
    const EngineStats& s = *stats;
    w.gauge(p + "num_requests_running", "Sequences in the running batch.", s.num_running);
    w.gauge(p + "num_requests_waiting", "Sequences waiting to be scheduled.", s.num_waiting);
    const double usage = s.kv.num_blocks == 0 ? 0.0 : static_cast<double>(s.kv.num_used_blocks) / s.kv.num_blocks;
    w.gauge(p + "kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).", usage);
    w.counter(p + "prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
              static_cast<double>(s.prefix_cache.num_queried_tokens));
    w.counter(p + "prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
              static_cast<double>(s.prefix_cache.num_hit_tokens));
    w.counter(p + "num_preemptions_total", "Sequences preempted (recomputed later) for want of KV blocks.",
              static_cast<double>(s.num_preemptions));
    w.counter(p + "prompt_tokens_total", "Prompt tokens of admitted requests.", static_cast<double>(s.prompt_tokens));
    w.counter(p + "generation_tokens_total", "Tokens generated.", static_cast<double>(s.generation_tokens));
    w.counter(p + "spec_decode_num_drafts_total", "Decode steps of sequences that speculated.",
              static_cast<double>(s.spec_steps));
    w.counter(p + "spec_decode_num_draft_tokens_total", "Tokens proposed by speculative decoding.",
              static_cast<double>(s.spec_proposed_tokens));
    w.counter(p + "spec_decode_num_accepted_tokens_total", "Proposed tokens the target accepted.",
              static_cast<double>(s.spec_accepted_tokens));
    w.histogram(p + "time_to_first_token_seconds", "Time from arrival to the first generated token.",
                s.time_to_first_token);
    w.histogram(p + "inter_token_latency_seconds", "Time between consecutive outputs of a request.",
                s.inter_token_latency);
    w.histogram(p + "e2e_request_latency_seconds", "Time from arrival to the last token.", s.e2e_latency);
    w.histogram(p + "request_queue_time_seconds", "Time from arrival to the first scheduled step.", s.queue_time);
  }
  w.family(p + "request_success_total", "counter", "Finished completions (choices) by finish reason.");
  auto finished = counters != nullptr ? counters->finished() : std::map<std::string, std::int64_t>{};
  for (const char* reason : {"stop", "length", "abort"}) finished.try_emplace(reason, 0);
  for (const auto& [reason, count] : finished)
    w.sample(p + "request_success_total", static_cast<double>(count),
             fmt::format("finished_reason=\"{}\"", escape_label(reason)));
}

// What only vLLM's names carry: the older KV usage name, the cache's shape as
// an info gauge (routers read block_size from it), and the LoRA info gauge
// the Inference Extension reads (folio serves no adapters: empty lists).
void write_vllm_only(Writer& w, const EngineStats& s, const EngineConfig* config) {
  const double usage = s.kv.num_blocks == 0 ? 0.0 : static_cast<double>(s.kv.num_used_blocks) / s.kv.num_blocks;
  w.gauge("vllm:gpu_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full); vLLM's older name.", usage);
  w.family("vllm:cache_config_info", "gauge", "The KV cache's configuration, in labels.");
  w.sample("vllm:cache_config_info", 1,
           fmt::format("block_size=\"{}\",num_gpu_blocks=\"{}\",num_cpu_blocks=\"0\",enable_prefix_caching=\"{}\","
                       "cache_dtype=\"{}\"",
                       s.kv.block_size, s.kv.num_blocks,
                       config == nullptr || config->enable_prefix_caching ? "True" : "False",
                       config == nullptr ? "auto" : escape_label(config->kv_dtype.name())));
  w.family("vllm:lora_requests_info", "gauge", "Running and waiting LoRA adapters (none: folio serves no adapters).");
  w.sample("vllm:lora_requests_info", 0, "max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"");
}

void write_folio_only(Writer& w, const ModelMetrics& in) {
  if (in.engine != nullptr) {
    const EngineStats& s = *in.engine;
    w.gauge("folio:kv_cache_blocks_used", "KV cache blocks referenced by running sequences.", s.kv.num_used_blocks);
    w.gauge("folio:kv_cache_blocks_total", "KV cache blocks in the pool.", s.kv.num_blocks);
    w.gauge("folio:kv_cache_bytes", "Bytes of the KV cache pool: K and V of every layer, codes and scales.",
            static_cast<double>(s.kv_bytes));
    w.gauge("folio:prefix_cache_blocks", "KV blocks in the prefix cache, in use or evictable.", s.kv.num_cached_blocks);
    w.gauge("folio:prefix_cache_block_hashes",
            "Distinct block hashes in the prefix cache: the block set a KV-event subscriber holds.",
            s.kv.num_cached_hashes);
    w.gauge("folio:spec_decode_acceptance_rate", "Accepted / proposed tokens since start (0 when none proposed).",
            s.spec_proposed_tokens ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_proposed_tokens) : 0.0);
    w.gauge("folio:spec_decode_mean_accepted_length", "Tokens emitted per speculating step: accepted + 1, averaged.",
            s.spec_steps ? 1.0 + static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_steps) : 0.0);
  }
  if (in.kv_events != nullptr) {
    w.counter("folio:kv_events_batches_total", "KV event batches the engine handed to the publisher.",
              static_cast<double>(in.kv_events->num_batches));
    w.counter("folio:kv_events_total", "KV events (BlockStored, BlockRemoved, AllBlocksCleared) in those batches.",
              static_cast<double>(in.kv_events->num_events));
    w.counter("folio:kv_events_dropped_batches_total",
              "KV event batches dropped because the publisher's queue was full (a gap in the sequence numbers).",
              static_cast<double>(in.kv_events->num_dropped_batches));
  }
}

void write_http(Writer& w, const ServerCounters& server, const HttpServer::Stats* http) {
  w.family("folio:http_responses_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, count] : server.statuses())
    w.sample("folio:http_responses_total", static_cast<double>(count), fmt::format("status=\"{}\"", status));
  if (http == nullptr) return;
  w.gauge("folio:http_connections", "Client connections open.", http->num_connections);
  w.gauge("folio:http_idle_connections", "Keep-alive connections waiting for a request.", http->num_idle_connections);
  w.counter("folio:http_connections_refused_total",
            "Connections refused on arrival (over --max-connections or --max-connections-per-client).",
            static_cast<double>(http->num_refused_connections));
  w.counter("folio:http_idle_connections_closed_total", "Idle keep-alive connections closed to make room.",
            static_cast<double>(http->num_evicted_idle));
  w.counter("folio:http_slow_headers_closed_total",
            "Connections whose request header was still arriving, closed to make room.",
            static_cast<double>(http->num_slow_headers_closed));
  w.gauge("folio:http_pending_body_bytes", "Request body bytes being read or parsed.",
          static_cast<double>(http->pending_body_bytes));
  w.gauge("folio:http_worker_threads", "Threads started for request handlers.", http->num_workers);
}

}  // namespace

std::string prometheus_metrics(const std::vector<ModelMetrics>& models, const ServerCounters& server,
                               const HttpServer::Stats* http) {
  // Written in the order of a single model's page: folio's families, the
  // server's, then vLLM's.
  Writer w;
  for (const ModelMetrics& m : models) {
    w.set_model(m.name);
    write_shared(w, "folio:", m.engine, m.counters);
    write_folio_only(w, m);
  }
  w.set_model(models.empty() ? std::string() : models.front().name);
  write_http(w, server, http);
  for (const ModelMetrics& m : models) {
    w.set_model(m.name);
    write_shared(w, "vllm:", m.engine, m.counters);
    if (m.engine != nullptr) write_vllm_only(w, *m.engine, m.engine_config);
  }
  return w.take();
}

}  // namespace folio::server
