// Prometheus text exposition (format 0.0.4) of the engine's statistics and
// the server's counters, under vLLM's metric names twice: with the folio:
// prefix, and with vLLM's own vllm: prefix for the routers and dashboards
// built for vLLM (the Gateway API Inference Extension's model-server protocol
// reads vllm:num_requests_waiting, vllm:kv_cache_usage_perc, ...). Every
// family has HELP and TYPE lines; histograms have cumulative _bucket{le}
// lines, _sum, _count.
#pragma once

#include <string>

#include "engine/engine.h"
#include "server/api/server_counters.h"
#include "server/http/http_server.h"

namespace folio::server {

// What the page is made of; a null source leaves its families out (no
// engine while loading, no KV events unless --kv-events-endpoint).
struct MetricsSources {
  const EngineStats* engine = nullptr;
  const EngineConfig* engine_config = nullptr;
  const KvEventSinkStats* kv_events = nullptr;
  const HttpServer::Stats* http = nullptr;
};

// model_name labels every sample.
std::string prometheus_metrics(const MetricsSources& sources, const ServerCounters& counters,
                               const std::string& model_name);

}  // namespace folio::server
