// Prometheus text exposition (format 0.0.4) of the engine's statistics and
// the server's counters, under vLLM's metric names with the folio: prefix so
// that dashboards built for vLLM read it with a rename. Every family has HELP
// and TYPE lines; histograms have cumulative _bucket{le} lines, _sum, _count.
#pragma once

#include <string>

#include "engine/engine.h"
#include "server/http_server.h"
#include "server/server_counters.h"

namespace folio::server {

// model_name labels every sample. A null engine (still loading) exposes only
// the server's counters; a null `http` leaves out the connection gauges.
std::string prometheus_metrics(const EngineStats* stats, const ServerCounters& counters, const HttpServer::Stats* http,
                               const std::string& model_name);

}  // namespace folio::server
