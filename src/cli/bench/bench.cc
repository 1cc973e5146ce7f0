// `folio bench`: the benchmark client. It generates a reproducible workload
// (fixed lengths or a chat-like mix, random token ids from a seed), runs it
// through an Engine in this process (default) or against a server (--url), and
// reports throughput and latency percentiles; with --peer llama.cpp it runs
// the same workload through llama.cpp's batched decoding in turn with folio,
// --repetitions times, and reports both and their ratios from the same run.
// --dataset grounded|chat|FILE.jsonl sends text prompts (chat messages rendered
// with the model's template) that stop at end-of-generation; with
// --speculative the engine speculates and the report gives proposed and
// accepted tokens, and --compare-speculation runs each repetition with and
// without it in turn (the per-request switch) and reports the speed-up.
// --suite bandwidth measures the machine's streaming-read bandwidth instead.
//
//   folio bench -m M.gguf --num-prompts 64 --input-len 128 --output-len 128
//   folio bench --dataset mix --num-prompts 200 --request-rate 2 --max-concurrency 16
//   folio bench --url http://127.0.0.1:8080 --num-prompts 64      (a server; -m: its GGUF, for the vocab)
//   folio bench --peer llama.cpp --repetitions 5 --json           (beside llama.cpp, same prompts)
//   folio bench --dataset grounded --max-concurrency 1 --speculative ngram --compare-speculation
//   folio bench --suite bandwidth -t 2
// bench/cpu_vs_llamacpp.py runs the CPU comparison tables of bench/RESULTS.md.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "cli/bench/bandwidth.h"
#include "cli/bench/offline.h"
#include "core/read_file.h"
#include "cli/bench/peer.h"
#include "cli/bench/progress.h"
#include "cli/bench/report.h"
#include "cli/bench/server.h"
#include "cli/bench/workload.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/engine_options.h"
#include "core/error.h"
#include "engine/engine.h"
#include "kv/capacity_planner.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "tensor/kv_dtype.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace folio::cli {
namespace {

using Json = nlohmann::ordered_json;

struct BenchOptions {
  ModelOptions model;
  EngineOptions engine;
  bool compare_speculation = false;
  bool compare_schema = false;  // with json_schema: every repetition also runs unconstrained
  WorkloadOptions workload;
  std::string request_rate = "inf";
  int max_concurrency = 0;
  ServerTarget server;
  std::string peer;
  PeerOptions peer_options;
  int repetitions = 1;
  bool no_warmup = false;
  bool json = false;
  bool no_progress = false;
  std::string save_timings;
  std::string json_schema;  // a file: every request's output follows this JSON schema
  std::string suite;
  std::string bandwidth_size = "512MiB";
  int bandwidth_passes = 10;
};

// What one decode step reads besides the KV cache: every weight once, except
// the token embedding table, of which only the rows looked up are read -
// unless the output projection shares it, and then all of it is.
struct ModelFigures {
  std::string name;
  std::uint64_t weight_bytes_per_step = 0;
  std::int64_t kv_bytes_per_token = 0;
  std::int64_t num_layers = 0;
};

// Every byte of a token's K and V rows in every layer, scales included.
std::int64_t kv_bytes_per_token(const ModelConfig& config, const KvCacheDType& kv_dtype) {
  const std::int64_t rows = config.num_layers * config.num_kv_heads;
  return rows * (kv_row_total_bytes(kv_dtype.k, config.head_dim) + kv_row_total_bytes(kv_dtype.v, config.value_head_dim));
}

ModelFigures model_figures(const GgufFile& file, const KvCacheDType& kv_dtype) {
  const ModelConfig config = ModelConfig::from_gguf(file);
  ModelFigures m;
  m.name = file.get_string("general.name", "");
  m.num_layers = config.num_layers;
  const bool has_output = file.find_tensor("output.weight") != nullptr;
  for (const GgufTensorInfo& t : file.tensors())
    if (t.name != "token_embd.weight" || !has_output) m.weight_bytes_per_step += t.size_bytes;
  m.kv_bytes_per_token = kv_bytes_per_token(config, kv_dtype);
  return m;
}

// The same figures from a loaded model's weights, whatever its format.
ModelFigures model_figures(const ModelSession& session, const KvCacheDType& kv_dtype) {
  const Weights& weights = *session.loaded.weights;
  ModelFigures m;
  m.name = session.config().name;
  m.num_layers = session.config().num_layers;
  const bool has_output = weights.find("output.weight") != nullptr;
  for (const auto& [name, t] : weights.tensors())
    if (name != "token_embd.weight" || !has_output) m.weight_bytes_per_step += t.bytes();
  m.kv_bytes_per_token = kv_bytes_per_token(session.config(), kv_dtype);
  return m;
}

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// The 1-, 5- and 15-minute load averages: how busy the machine was.
std::vector<double> load_average() {
  std::ifstream in("/proc/loadavg");
  std::vector<double> v(3, 0.0);
  in >> v[0] >> v[1] >> v[2];
  return v;
}

std::uint64_t byte_size_option(const std::string& text, const char* flag) {
  auto bytes = parse_byte_size(text);
  if (!bytes || *bytes <= 0) fail("{} \"{}\" is not a size; write it with a unit: 2GiB, 512MiB", flag, text);
  return static_cast<std::uint64_t>(*bytes);
}

void run_bandwidth_suite(const BenchOptions& o) {
  if (o.bandwidth_passes < 1) fail("--bandwidth-passes must be at least 1");
  const int threads = o.model.session.backend.num_threads > 0 ? o.model.session.backend.num_threads : hardware_threads();
  const BandwidthResult r =
      measure_read_bandwidth(byte_size_option(o.bandwidth_size, "--bandwidth-size"), threads, o.bandwidth_passes);
  if (o.json) {
    Json j{{"suite", "bandwidth"},     {"threads", r.threads},           {"bytes", r.bytes},
           {"passes", r.gb_per_s.size()}, {"median_gb_per_s", r.median_gb_per_s}, {"max_gb_per_s", r.max_gb_per_s},
           {"gb_per_s", r.gb_per_s},     {"load_average", load_average()}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("streaming read, %d threads, %.0f MiB x %zu passes: median %.2f GB/s, max %.2f GB/s\n", r.threads,
              static_cast<double>(r.bytes) / (1 << 20), r.gb_per_s.size(), r.median_gb_per_s, r.max_gb_per_s);
}

// How far folio's and the peer's greedy outputs agree: a sanity check that
// both ran the same model on the same prompts (near-ties of the logits make
// them part ways now and then, since the kernels round differently).
void compare_outputs(const RunTimings& a, const RunTimings& b, Comparison& c) {
  for (std::size_t i = 0; i < a.requests.size() && i < b.requests.size(); ++i) {
    const std::vector<TokenId>& x = a.requests[i].output_ids;
    const std::vector<TokenId>& y = b.requests[i].output_ids;
    if (x.empty() || y.empty()) continue;
    ++c.compared_outputs;
    if (x == y) ++c.identical_outputs;
    std::size_t k = 0;
    while (k < x.size() && k < y.size() && x[k] == y[k]) ++k;
    c.common_prefix_tokens += static_cast<std::int64_t>(k);
    c.compared_tokens += static_cast<std::int64_t>(std::max(x.size(), y.size()));
  }
}

// The engine's counters' growth over the measured runs: speculative
// decoding, and KV paging waste (slots of allocated blocks holding no token,
// summed over steps).
struct EngineFigures {
  std::int64_t proposed = 0;
  std::int64_t accepted = 0;
  std::int64_t steps = 0;  // decode steps of sequences that speculated
  std::int64_t kv_slot_steps = 0;
  std::int64_t kv_empty_slot_steps = 0;
  std::int64_t engine_steps = 0;
  std::int64_t preemptions = 0;

  void add(const EngineStats& before, const EngineStats& after) {
    proposed += after.spec_proposed_tokens - before.spec_proposed_tokens;
    accepted += after.spec_accepted_tokens - before.spec_accepted_tokens;
    steps += after.spec_steps - before.spec_steps;
    kv_slot_steps += after.kv_slot_steps - before.kv_slot_steps;
    kv_empty_slot_steps += after.kv_empty_slot_steps - before.kv_empty_slot_steps;
    engine_steps += after.num_steps - before.num_steps;
    preemptions += after.num_preemptions - before.num_preemptions;
  }
  // A server's counters, from its /metrics (folio serve exports these).
  void add(const std::map<std::string, double>& before, const std::map<std::string, double>& after) {
    auto delta = [&](const char* name) {
      const auto a = after.find(name), b = before.find(name);
      if (a == after.end() || b == before.end()) return std::int64_t{0};
      return static_cast<std::int64_t>(a->second - b->second);
    };
    proposed += delta("folio:spec_decode_num_draft_tokens_total");
    accepted += delta("folio:spec_decode_num_accepted_tokens_total");
    steps += delta("folio:spec_decode_num_drafts_total");
    preemptions += delta("folio:num_preemptions_total");
  }
  double kv_waste() const {
    return kv_slot_steps ? static_cast<double>(kv_empty_slot_steps) / static_cast<double>(kv_slot_steps) : 0;
  }

  double acceptance_rate() const { return proposed ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0; }
  // Tokens emitted per speculating step: accepted + 1.
  double mean_accepted_length() const { return steps ? 1.0 + static_cast<double>(accepted) / static_cast<double>(steps) : 0; }
  Json engine_json() const {
    return Json{{"steps", engine_steps}, {"preemptions", preemptions}, {"kv_paging_waste", kv_waste()}};
  }
  Json speculation_json() const {
    return Json{{"proposed_tokens", proposed},
                {"accepted_tokens", accepted},
                {"speculating_steps", steps},
                {"acceptance_rate", acceptance_rate()},
                {"mean_accepted_length", mean_accepted_length()}};
  }
};

std::string format_engine(const EngineFigures& f) {
  return fmt::format("engine: {} steps, {} preemptions; KV paging waste {:.2f}% (allocated slots holding no token, "
                     "averaged over steps)\n",
                     f.engine_steps, f.preemptions, 100.0 * f.kv_waste());
}

std::string format_speculation(const EngineFigures& f) {
  return fmt::format("speculation: {} tokens proposed, {} accepted ({:.1f}%), {:.2f} tokens per speculating step\n",
                     f.proposed, f.accepted, 100.0 * f.acceptance_rate(), f.mean_accepted_length());
}

// The workload of one repetition: random token ids from the vocab, or text
// prompts rendered and tokenized as a server would.
class WorkloadMaker {
 public:
  // `file` is read only when no tokenizer is given (server mode).
  WorkloadMaker(const WorkloadOptions& options, const GgufFile* file, const Tokenizer* tokenizer,
                const ChatTemplate* chat_template)
      : options_(options) {
    FOLIO_CHECK(tokenizer != nullptr || file != nullptr);
    if (!is_text_dataset(options.dataset)) {
      pool_ = prompt_token_pool(tokenizer ? tokenizer->vocab() : Vocab::from_gguf(*file));
      return;
    }
    prompts_ = read_text_prompts(options.dataset);
    if (!tokenizer) {  // server mode: the file's tokenizer and template, loaded here
      own_tokenizer_ = Tokenizer::create(Vocab::from_gguf(*file));
      own_template_ = std::make_unique<ChatTemplate>(ChatTemplate::from_gguf(*file));
      tokenizer = own_tokenizer_.get();
      chat_template = own_template_.get();
    }
    tokenizer_ = tokenizer;
    chat_template_ = chat_template;
  }

  BenchWorkload make(std::uint64_t seed, int num_prompts, int input_len, int output_len) const {
    WorkloadOptions w = options_;
    w.seed = seed;
    w.num_prompts = num_prompts;
    w.input_len = input_len;
    w.output_len = output_len;
    if (prompts_.empty()) return make_workload(w, pool_);
    return make_text_workload(w, prompts_, [this](const TextPrompt& p) {
      if (p.messages.is_null()) return tokenizer_->encode(p.text, /*add_special=*/true, /*parse_special=*/false);
      const std::string text = chat_template_->render(p.messages, chat_render_options(tokenizer_->vocab()));
      return tokenizer_->encode(text, /*add_special=*/true, /*parse_special=*/true);
    });
  }

  // The largest token id a prompt may hold (random datasets).
  TokenId max_token_id() const { return pool_.empty() ? 0 : pool_.back(); }

 private:
  WorkloadOptions options_;
  std::vector<TokenId> pool_;
  std::vector<TextPrompt> prompts_;
  std::unique_ptr<Tokenizer> own_tokenizer_;
  std::unique_ptr<ChatTemplate> own_template_;
  const Tokenizer* tokenizer_ = nullptr;
  const ChatTemplate* chat_template_ = nullptr;
};

void set_speculative(BenchWorkload& w, bool on) {
  for (BenchRequest& r : w.requests) r.speculative = on;
}

void set_constrained(BenchWorkload& w, bool on) {
  for (BenchRequest& r : w.requests) r.constrained = on;
}

void bench(BenchOptions o) {
  if (o.suite == "bandwidth") return run_bandwidth_suite(o);
  if (o.repetitions < 1) fail("--repetitions must be at least 1, got {}", o.repetitions);
  try {
    o.workload.request_rate = std::stod(o.request_rate);
  } catch (const std::exception&) {
    fail("--request-rate \"{}\" is not a number (inf: all at once)", o.request_rate);
  }
  const bool server_mode = !o.server.url.empty();
  if (o.compare_speculation && !o.peer.empty()) fail("--compare-speculation and --peer are separate runs; give one");
  if (o.compare_speculation && !server_mode && o.engine.speculative.method.empty())
    fail("--compare-speculation needs --speculative (ngram or draft:PATH)");
  if (server_mode && !o.engine.speculative.method.empty())
    fail("--speculative configures the in-process engine; a server speculates as it was started (folio serve "
         "--speculative), and --compare-speculation turns it off per request");
  const EngineConfig engine_config = o.engine.resolved();
  const KvCacheDType kv_dtype = engine_config.kv_dtype;
  const ModelSessionOptions session_options = o.model.resolved();
  const int threads = o.model.session.backend.num_threads > 0 ? o.model.session.backend.num_threads : hardware_threads();
  const bool progress = !o.no_progress && BenchProgress::stderr_is_terminal();

  // The model: loaded and served here, or only its vocab read to build
  // prompts for a server that has the same file.
  std::shared_ptr<ModelSession> session;
  std::shared_ptr<Engine> engine;
  std::shared_ptr<const GgufFile> file;
  if (server_mode) {
    file = std::make_shared<const GgufFile>(GgufFile::open(session_options.model_path));
  } else {
    session = open_model(o.model);
    file = session->loaded.file;  // null for a Hugging Face directory
  }
  const ModelFigures figures = file ? model_figures(*file, kv_dtype) : model_figures(*session, kv_dtype);
  const WorkloadMaker maker(o.workload, file.get(), session ? session->tokenizer.get() : nullptr,
                            session ? session->chat_template.get() : nullptr);

  // Every repetition gets prompts of its own (seed + repetition), so that no
  // run finds the previous one's prompts in a prefix cache.
  std::vector<BenchWorkload> workloads;
  for (int r = 0; r < o.repetitions; ++r)
    workloads.push_back(maker.make(o.workload.seed + static_cast<std::uint64_t>(r), o.workload.num_prompts,
                                   o.workload.input_len, o.workload.output_len));
  // The warm-up: a small batch that pages the weights in and starts every thread.
  const int warm_prompts = std::max(1, std::min({o.workload.num_prompts, engine_config.max_num_seqs, 8}));
  const BenchWorkload warmup = maker.make(o.workload.seed + 1000003, warm_prompts, 32, 8);
  int max_seq_len = warmup.max_seq_len();
  for (const BenchWorkload& w : workloads) max_seq_len = std::max(max_seq_len, w.max_seq_len());

  if (!server_mode) {
    EngineConfig config = engine_config;
    config.max_waiting = std::max(config.max_waiting, o.workload.num_prompts + 16);
    engine = std::make_shared<Engine>(session, config);
    if (max_seq_len > engine->max_model_len())
      fail("requests need up to {} tokens of context but the engine holds {}; shorten --input-len/--output-len "
           "or give more --kv-cache-memory",
           max_seq_len, engine->max_model_len());
  }

  std::unique_ptr<LlamaCppPeer> peer;
  if (!o.peer.empty()) {
    if (o.peer != "llama.cpp") fail("--peer must be llama.cpp, got \"{}\"", o.peer);
    PeerOptions p = o.peer_options;
    p.model_path = session_options.model_path;
    p.threads = threads;
    p.max_num_seqs = std::max(1, std::min(engine_config.max_num_seqs, o.workload.num_prompts));
    if (o.max_concurrency > 0) p.max_num_seqs = std::min(p.max_num_seqs, o.max_concurrency);
    p.max_num_seqs = std::max(p.max_num_seqs, std::min(warm_prompts, engine_config.max_num_seqs));
    p.max_num_batched_tokens = engine_config.max_num_batched_tokens;
    p.max_seq_len = max_seq_len;
    std::fprintf(stderr, "folio bench: starting the llama.cpp peer\n");
    peer = std::make_unique<LlamaCppPeer>(p);
    if (peer->vocab_size() <= maker.max_token_id())
      fail("the llama.cpp peer's vocab has {} tokens but prompts use ids up to {}", peer->vocab_size(),
           maker.max_token_id());
  }

  std::shared_ptr<const CompiledConstraint> constraint;
  if (o.compare_schema && o.json_schema.empty()) fail("--compare-schema needs --json-schema FILE");
  if (!o.json_schema.empty()) {
    if (o.compare_speculation || peer) fail("--json-schema cannot be combined with --peer or --compare-speculation");
    const std::string schema = read_file(o.json_schema);
    if (server_mode) {
      if (!Json::accept(schema)) fail("{} is not valid JSON", o.json_schema);
      o.server.json_schema = schema;
    } else {
      constraint = session->constraints->compile({ConstraintSpec::Kind::kJsonSchema, schema, {}});
    }
    for (BenchWorkload& w : workloads) set_constrained(w, true);
  }
  auto run_folio = [&](const BenchWorkload& w, const std::string& label) {
    BenchProgress bar(label, static_cast<int>(w.requests.size()), w.output_tokens(), progress);
    return server_mode ? run_server(o.server, w, o.max_concurrency, bar)
                       : run_offline(*engine, w, o.max_concurrency, bar, constraint);
  };
  auto run_peer = [&](const BenchWorkload& w, const std::string& label) {
    if (progress) std::fprintf(stderr, "%s: running %zu requests\n", label.c_str(), w.requests.size());
    return peer->run(w, o.max_concurrency);
  };

  const std::vector<double> load_before = load_average();
  if (!o.no_warmup) {
    run_folio(warmup, "warm-up folio");
    if (peer) run_peer(warmup, "warm-up llama.cpp");
  }
  Comparison comparison;
  comparison.peer_name = o.compare_speculation ? "no-spec" : o.compare_schema ? "plain" : o.peer;
  if (o.compare_speculation) comparison.folio_name = "spec";
  if (o.compare_schema) comparison.folio_name = "schema";
  const bool paired = peer || o.compare_speculation || o.compare_schema;
  EngineFigures engine_figures;
  Json saved = Json::array();
  for (int r = 0; r < o.repetitions; ++r) {
    const std::string of = o.repetitions > 1 ? fmt::format(" {}/{}", r + 1, o.repetitions) : "";
    BenchWorkload& workload = workloads[static_cast<std::size_t>(r)];
    const EngineStats before = engine ? engine->stats() : EngineStats{};
    const std::map<std::string, double> metrics_before = server_mode ? scrape_metrics(o.server) : std::map<std::string, double>{};
    RunTimings mine = run_folio(workload, "folio" + of);
    if (engine) engine_figures.add(before, engine->stats());
    if (server_mode) engine_figures.add(metrics_before, scrape_metrics(o.server));
    comparison.folio.push_back(summarize(mine));
    if (!o.save_timings.empty()) saved.push_back({{"engine", "folio"}, {"repetition", r}, {"timings", to_json(mine)}});
    if (comparison.folio.back().num_failed > 0) {
      for (const RequestTiming& t : mine.requests)
        if (!t.error.empty()) fail("a request failed: {}", t.error);
    }
    if (paired) {
      RunTimings theirs;
      if (peer) {
        theirs = run_peer(workload, "llama.cpp" + of);
      } else if (o.compare_speculation) {
        set_speculative(workload, false);
        theirs = run_folio(workload, "no speculation" + of);
      } else {
        set_constrained(workload, false);
        theirs = run_folio(workload, "no schema" + of);
      }
      comparison.peer.push_back(summarize(theirs));
      if (!o.compare_schema) compare_outputs(mine, theirs, comparison);  // a schema changes the output
      if (!o.save_timings.empty())
        saved.push_back({{"engine", comparison.peer_name}, {"repetition", r}, {"timings", to_json(theirs)}});
    }
  }
  const std::vector<double> load_after = load_average();
  if (!o.save_timings.empty()) {
    std::ofstream out(o.save_timings);
    if (!out) fail("cannot write {}", o.save_timings);
    out << saved.dump() << "\n";
  }

  const BenchSummary folio_median = median_summary(comparison.folio);
  if (o.json) {
    Json folio_runs = Json::array();
    for (const BenchSummary& s : comparison.folio) folio_runs.push_back(to_json(s));
    Json j{{"mode", server_mode ? "server" : "offline"},
           {"model",
            {{"path", session_options.model_path},
             {"name", figures.name},
             {"weight_bytes_per_step", figures.weight_bytes_per_step},
             {"kv_bytes_per_token", figures.kv_bytes_per_token},
             {"num_layers", figures.num_layers}}},
           {"threads", threads},
           {"workload",
            {{"dataset", o.workload.dataset},
             {"num_prompts", o.workload.num_prompts},
             {"input_len", o.workload.input_len},
             {"output_len", o.workload.output_len},
             {"seed", o.workload.seed},
             {"request_rate", std::isfinite(o.workload.request_rate) ? Json(o.workload.request_rate) : Json("inf")},
             {"max_concurrency", o.max_concurrency},
             {"prompt_tokens", workloads.front().prompt_tokens()},
             {"output_tokens", workloads.front().output_tokens()}}},
           {"engine",
            {{"max_num_seqs", engine_config.max_num_seqs},
             {"max_num_batched_tokens", engine_config.max_num_batched_tokens},
             {"kv_cache_dtype", kv_dtype.name()},
             {"prefix_caching", engine_config.enable_prefix_caching},
             {"precision", o.model.session.backend.precision},
             {"speculative", o.engine.speculative.method.empty() ? Json(nullptr) : Json(o.engine.speculative.method)},
             {"num_speculative_tokens", o.engine.speculative.num_tokens}}},
           {"repetitions", o.repetitions},
           {"load_average", {{"before", load_before}, {"after", load_after}}},
           {"folio", {{"median", to_json(folio_median)}, {"runs", std::move(folio_runs)}}}};
    if (engine) j["engine_figures"] = engine_figures.engine_json();
    if (engine_figures.proposed > 0 || (engine && !o.engine.speculative.method.empty()))
      j["speculation"] = engine_figures.speculation_json();
    if (peer) {
      j["peer"] = to_json(comparison);
      j["peer"]["info"] = peer->info();
    }
    if (o.compare_speculation) j["no_speculation"] = to_json(comparison);
    if (o.compare_schema) j["no_schema"] = to_json(comparison);
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  const std::string what = o.repetitions > 1 ? fmt::format(" (median of {})", o.repetitions) : "";
  const std::string title = server_mode ? o.server.url : "folio";
  std::printf("%s", format_summary(title + what, folio_median).c_str());
  if (engine) std::printf("%s", format_engine(engine_figures).c_str());
  if (engine_figures.proposed > 0 || (engine && !o.engine.speculative.method.empty()))
    std::printf("%s", format_speculation(engine_figures).c_str());
  if (constraint) {
    const EngineStats st = engine->stats();
    std::printf("json schema %s: %lld token masks on the host, %.1f us each (%.3f s in all)\n", o.json_schema.c_str(),
                static_cast<long long>(st.constraint_masks),
                st.constraint_masks > 0 ? 1e6 * st.constraint_mask_seconds / static_cast<double>(st.constraint_masks) : 0.0,
                st.constraint_mask_seconds);
  }
  if (paired) {
    std::printf("%s", format_summary(comparison.peer_name + what, median_summary(comparison.peer)).c_str());
    std::printf("%s", format_comparison(comparison).c_str());
  }
  std::printf("threads %d, load average %.2f before, %.2f after\n", threads, load_before[0], load_after[0]);
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmark throughput and latency: in-process, against a server, or beside llama.cpp");
  auto o = std::make_shared<BenchOptions>();
  add_model_options(cmd, o->model);
  WorkloadOptions& w = o->workload;
  cmd->add_option("--dataset", w.dataset,
                  "Workload: random (fixed lengths), mix (chat-like log-normal lengths), or text prompts that stop at "
                  "end-of-generation: grounded, chat (bench/prompts/) or a JSON Lines file");
  cmd->add_option("--num-prompts", w.num_prompts, "Requests to send")->check(CLI::PositiveNumber);
  cmd->add_option("--input-len", w.input_len, "Prompt tokens per request (random)")->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", w.output_len, "Output tokens per request (random; end-of-generation ignored)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", w.seed, "Seed of prompts, lengths and arrivals (repetition r uses seed + r)");
  cmd->add_option("--request-rate", o->request_rate, "Requests per second, Poisson arrivals (default inf: all at once)");
  cmd->add_option("--max-concurrency", o->max_concurrency, "Most requests in flight (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  add_engine_options(cmd, o->engine);
  cmd->add_flag("--compare-speculation", o->compare_speculation,
                "Run each repetition also without speculation (the per-request switch) and report the ratios");
  cmd->add_option("--url", o->server.url,
                  "Benchmark a running OpenAI-compatible server instead (http://127.0.0.1:8080); -m names the "
                  "GGUF file whose vocab the prompts are drawn from");
  cmd->add_option("--api-key", o->server.api_key, "Bearer token for --url");
  cmd->add_option("--served-model-name", o->server.model_name, "The \"model\" of each request to --url (default: left out)");
  cmd->add_option("--peer", o->peer, "Also run the workload through this peer and compare: llama.cpp")
      ->check(CLI::IsMember({"llama.cpp"}));
  cmd->add_option("--peer-python", o->peer_options.python,
                  "Python with llama-cpp-python (default: build/venv-ref/bin/python, see scripts/setup_reference.sh)");
  cmd->add_option("--peer-script", o->peer_options.script, "The peer script (default: bench/llama_cpp_peer.py)");
  cmd->add_option("--repetitions", o->repetitions, "Runs of the workload, folio and peer in turn; medians reported")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-warmup", o->no_warmup, "Skip the small warm-up batch before the measured runs");
  cmd->add_flag("--json", o->json, "Print the results as JSON on stdout");
  cmd->add_flag("--no-progress", o->no_progress, "No progress bar on stderr");
  cmd->add_option("--save-timings", o->save_timings, "Write every request's timings, every run, to this JSON file");
  cmd->add_option("--json-schema", o->json_schema,
                  "Constrain every output to this JSON schema file (in process, or as the response_format of each "
                  "request to --url; a schema that ends before --output-len tokens ends the request early)");
  cmd->add_flag("--compare-schema", o->compare_schema,
                "With --json-schema: run each repetition also unconstrained and report the ratios");
  cmd->add_option("--suite", o->suite,
                  "Run a suite instead of a workload: bandwidth (streaming-read GB/s on --threads threads); the "
                  "CPU comparison with llama.cpp is bench/cpu_vs_llamacpp.py")
      ->check(CLI::IsMember({"bandwidth"}));
  cmd->add_option("--bandwidth-size", o->bandwidth_size, "Buffer the bandwidth suite reads (default 512MiB)");
  cmd->add_option("--bandwidth-passes", o->bandwidth_passes, "Passes over it (default 10)")->check(CLI::PositiveNumber);
  cmd->callback([o] { bench(*o); });
}

}  // namespace folio::cli
