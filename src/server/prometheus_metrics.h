// Prometheus text exposition (format 0.0.4) of the engine's statistics and
// the server's counters, under vLLM's metric names twice: with the folio:
// prefix, and with vLLM's own vllm: prefix for the routers and dashboards
// built for vLLM (the Gateway API Inference Extension's model-server protocol
// reads vllm:num_requests_waiting, vllm:kv_cache_usage_perc, ...). Every
// family has HELP and TYPE lines; histograms have cumulative _bucket{le}
// lines, _sum, _count. Several models share each family, told apart by the
// model_name label vLLM uses.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api/server_counters.h"
#include "server/http/http_server.h"

namespace folio::server {

// One served model's part of the page; a null source leaves its families
// out (no engine while it is not loaded, no KV events unless
// --kv-events-endpoint).
struct ModelMetrics {
  std::string name;  // the model_name label of its samples
  const EngineStats* engine = nullptr;
  const EngineConfig* engine_config = nullptr;
  const KvEventSinkStats* kv_events = nullptr;
  const ServerCounters* counters = nullptr;  // its finished requests
};

// The page: each family once, with a sample per model; the server's own
// families (HTTP) carry the first model's name.
std::string prometheus_metrics(const std::vector<ModelMetrics>& models, const ServerCounters& server,
                               const HttpServer::Stats* http);

}  // namespace folio::server
