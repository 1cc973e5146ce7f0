// What one benchmark run measured - per-request timings, the same shape from
// every driver (in-process engine, HTTP server, llama.cpp peer) - and the
// figures derived from them with vLLM's definitions: throughputs, and
// percentiles of time to first token, time per output token, inter-token
// latency and end-to-end latency; printed as text or JSON, alone or beside a
// peer's run of the same workload with the ratios.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace folio::cli {

// One request as a client saw it; times in seconds from the start of the run.
struct RequestTiming {
  double arrival_s = 0;                // when it was due
  double submit_s = 0;                 // when it was sent
  std::vector<double> event_times_s;   // when each output event arrived
  std::vector<int> event_tokens;       // tokens in each event
  double finish_s = 0;
  int prompt_tokens = 0;
  int output_tokens = 0;
  std::vector<TokenId> output_ids;     // empty when the driver cannot see them (HTTP)
  std::string error;                   // non-empty: the request failed
};

struct RunTimings {
  double duration_s = 0;  // first send to last finish
  std::vector<RequestTiming> requests;
};

struct LatencyStats {  // milliseconds
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

struct BenchSummary {
  int num_requests = 0;
  int num_failed = 0;
  double duration_s = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  double request_throughput = 0;  // requests/s over the run
  double output_throughput = 0;   // output tokens/s over the run
  double total_throughput = 0;    // prompt and output tokens/s over the run
  // Output tokens produced once every request had its first token, per second
  // of that phase: the steady decode rate when all requests run together.
  double decode_throughput = 0;
  LatencyStats ttft_ms;  // time to first token, from the send
  LatencyStats tpot_ms;  // (e2e - ttft) / (output tokens - 1), requests with 2+ tokens
  LatencyStats itl_ms;   // gaps between output events
  LatencyStats e2e_ms;   // send to last token
};

BenchSummary summarize(const RunTimings& run);
// Field by field, the median over repetitions of the same workload.
BenchSummary median_summary(const std::vector<BenchSummary>& runs);

// The percentile p (0-100) of `values`, interpolated linearly (numpy's
// default, as vLLM reports them); 0 for no values.
double percentile(std::vector<double> values, double p);
double median(std::vector<double> values);

nlohmann::ordered_json to_json(const BenchSummary& s);
nlohmann::ordered_json to_json(const RunTimings& run);  // per request, for the peer and --save-timings
RunTimings timings_from_json(const nlohmann::json& j);

// A vLLM-style block of text for one run.
std::string format_summary(const std::string& title, const BenchSummary& s);

// Medians over repetitions of folio's and a peer's figures, with the median
// of the per-repetition ratios folio / peer.
struct Comparison {
  std::string folio_name = "folio";
  std::string peer_name;
  std::vector<BenchSummary> folio;  // [repetitions]
  std::vector<BenchSummary> peer;   // [repetitions]
  int identical_outputs = 0;        // requests whose greedy outputs were equal, over all repetitions
  int compared_outputs = 0;
  std::int64_t common_prefix_tokens = 0;  // output tokens before the first difference, summed
  std::int64_t compared_tokens = 0;
};

std::string format_comparison(const Comparison& c);
nlohmann::ordered_json to_json(const Comparison& c);

}  // namespace folio::cli
