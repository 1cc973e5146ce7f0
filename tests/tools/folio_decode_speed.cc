// folio_decode_speed: one request's prefill and decode speed through the
// engine, on any backend and model, a dummy preset included: the smoke figure
// of scripts/gpu_check.sh, which builds no server (and so no `folio` binary)
// on the GPU machine.
//
// Usage:
//   folio_decode_speed [--backend cuda] [--dummy PRESET[:RECIPE] | --model PATH]
//                      [--input-len 128] [--output-len 128] [--runs 3] [--kv-cache-dtype f16]
// Prints one line per run and a last line "decode_speed: ... median decode X tok/s".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "tensor/kv_dtype.h"

namespace {

struct Args {
  std::string backend = "cpu", dummy, model, kv = "f16";
  int input_len = 128, output_len = 128, runs = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) folio::fail("{} needs a value; see the usage at the top of folio_decode_speed.cc", flag);
    const std::string value = argv[++i];
    if (flag == "--backend")
      a.backend = value;
    else if (flag == "--dummy")
      a.dummy = value;
    else if (flag == "--model")
      a.model = value;
    else if (flag == "--kv-cache-dtype")
      a.kv = value;
    else if (flag == "--input-len")
      a.input_len = std::stoi(value);
    else if (flag == "--output-len")
      a.output_len = std::stoi(value);
    else if (flag == "--runs")
      a.runs = std::stoi(value);
    else
      folio::fail("unknown flag {}", flag);
  }
  if (a.dummy.empty() == a.model.empty()) folio::fail("give one of --dummy PRESET[:RECIPE] and --model PATH");
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    folio::ModelSessionOptions o;
    o.backend.name = a.backend;
    if (!a.dummy.empty()) {
      const auto colon = a.dummy.find(':');
      o.load_format = "dummy";
      o.model_path = a.dummy.substr(0, colon);
      if (colon != std::string::npos) o.dummy_weights = a.dummy.substr(colon + 1);
    } else {
      o.model_path = a.model;
    }
    const auto load_start = std::chrono::steady_clock::now();
    auto session = folio::open_model_session(o);
    std::printf("loaded %s on %s in %.1f s\n", session->loaded.path.c_str(), session->backend->name().c_str(),
                seconds_since(load_start));
    folio::EngineConfig c;
    c.max_model_len = a.input_len + a.output_len + 16;
    c.kv_cache_bytes = 1ull << 30;
    c.kv_dtype = folio::kv_cache_dtype_from_flag(a.kv);
    folio::Engine engine(session, c);
    std::mt19937 rng(1);
    std::vector<double> decode_rates;
    for (int run = 0; run < a.runs; ++run) {
      folio::EngineRequest r;
      for (int i = 0; i < a.input_len; ++i)
        r.prompt.push_back(static_cast<folio::TokenId>(rng() % static_cast<unsigned>(session->config().vocab_size)));
      r.params.temperature = 0;
      r.params.max_tokens = a.output_len;
      r.params.ignore_eos = true;
      const auto start = std::chrono::steady_clock::now();
      auto stream = engine.submit(r);
      double first = -1, last = 0;
      int tokens = 0;
      while (auto out = stream->next()) {
        if (!out->error.empty()) folio::fail("the request failed: {}", out->error);
        for (const auto& d : out->deltas) tokens += static_cast<int>(d.token_ids.size());
        if (tokens > 0 && first < 0) first = seconds_since(start);
        last = seconds_since(start);
        if (out->finished) break;
      }
      const double decode = tokens > 1 ? (tokens - 1) / (last - first) : 0.0;
      decode_rates.push_back(decode);
      std::printf("run %d: %d prompt tokens in %.3f s (%.0f tok/s), %d tokens decoded at %.1f tok/s\n", run,
                  a.input_len, first, a.input_len / first, tokens, decode);
    }
    std::sort(decode_rates.begin(), decode_rates.end());
    std::printf("decode_speed: %s on %s, batch 1, %d in / %d out: median decode %.1f tok/s\n",
                session->loaded.path.c_str(), session->backend->name().c_str(), a.input_len, a.output_len,
                decode_rates[decode_rates.size() / 2]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "folio_decode_speed: %s\n", e.what());
    return 1;
  }
}
