// run_server: a workload against an OpenAI-compatible server (folio serve,
// vLLM, llama-server) over streaming POST /v1/completions with token-id
// prompts, greedy, max_tokens and the request's ignore_eos (random-token
// prompts: outputs have their set length); timings are taken as the
// server-sent events arrive.
#pragma once

#include <map>
#include <string>

#include "cli/bench/progress.h"
#include "cli/bench/report.h"
#include "cli/bench/workload.h"

namespace folio::cli {

struct ServerTarget {
  std::string url;          // http://host:port, without /v1
  std::string api_key;      // sent as a bearer token when set
  std::string model_name;   // the request's "model"; empty: left out
  double timeout_s = 1800;  // for one whole request
  // A JSON schema's text: the requests marked constrained ask for it as
  // their response_format.
  std::string json_schema;
};

RunTimings run_server(const ServerTarget& target, const BenchWorkload& workload, int max_concurrency,
                      BenchProgress& progress);

// The server's Prometheus samples from GET /metrics, name -> value with the
// labels dropped and the samples of one name summed (one model per server);
// empty when it has none or cannot be reached (not every server exports them).
std::map<std::string, double> scrape_metrics(const ServerTarget& target);

}  // namespace folio::cli
