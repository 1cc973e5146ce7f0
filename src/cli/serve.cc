// `folio serve`: the OpenAI-compatible HTTP server over one model or several
// (each -m, each model of --models-dir: the first loads at start, the others
// when a request first names them). It listens at once (GET /health and
// /ready answer 503 until the first model has loaded),
// serves until SIGTERM or SIGINT, then refuses new work (/ready answers 503,
// /health stays 200), lets running requests finish for up to
// --shutdown-timeout seconds and exits 0.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "cli/bench/bandwidth.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/model_list.h"
#include "cli/model_options.h"
#include "cli/startup_budget.h"
#include "core/error.h"
#include "engine/engine.h"
#include "kv/capacity_planner.h"
#include "server/api_server.h"
#include "server/events/kv_event_publisher.h"

namespace folio::cli {
namespace {

// The margin bench/cascade_eval.py found on its calibration half to send half
// of the packaged Qwen2.5-Coder 0.5B's answers to the 1.5B (bench/RESULTS.md).
constexpr double kDefaultCascadeThreshold = 0.27;

struct ServeOptions {
  ModelOptions model;
  server::ServerOptions server;
  EngineOptions engine_flags;
  EngineConfig engine;  // engine_flags resolved
  double shutdown_timeout_s = 30;
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::string chat_template_file;
  std::string chat_template_kwargs;
  double header_timeout_s = 10, body_timeout_s = 60, keep_alive_timeout_s = 5, write_timeout_s = 30;
  server::KvEventPublisherOptions kv_events;  // endpoint empty: no KV events
  std::string models_dir;                     // every model in it is served too
  std::string models_memory;                  // budget of the loaded models together, with a unit; empty: none
  double model_keep_alive_s = -1;             // idle seconds before an unload; < 0: 300 with several models, else never
  double model_load_timeout_s = 300;          // how long a request waits for its model to load
  std::vector<std::string> cascades;          // --cascade NAME=SMALL,LARGE
  double cascade_threshold = kDefaultCascadeThreshold;
  std::string cascade_measure = "margin";
};

std::string gib(std::int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

// Every connection is a descriptor: raise the soft limit as far as the hard
// one allows, and say so when --max-connections still does not fit.
void make_room_for_connections(int max_connections) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  const rlim_t want = static_cast<rlim_t>(max_connections) + 256;
  if (r.rlim_cur < want) {
    r.rlim_cur = r.rlim_max == RLIM_INFINITY ? want : std::min(want, r.rlim_max);
    setrlimit(RLIMIT_NOFILE, &r);
  }
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < want)
    std::fprintf(stderr,
                 "folio: warning: this process may open %llu files but --max-connections %d needs about %llu; "
                 "raise the limit (ulimit -n) or lower --max-connections\n",
                 static_cast<unsigned long long>(r.rlim_cur), max_connections, static_cast<unsigned long long>(want));
}


// SIGINT and SIGTERM, blocked in every thread so that only sigtimedwait takes them.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Waits up to `timeout` for SIGINT or SIGTERM; the signal, or 0.
int wait_signal(const sigset_t& set, std::chrono::milliseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000), static_cast<long>(timeout.count() % 1000) * 1000000L};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

void serve(ServeOptions o) {
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<ListedModel> listed;
  for (const std::string& text : o.model.models) listed.push_back(parse_listed_model(text));
  if (!o.models_dir.empty())
    for (ListedModel& m : models_in_dir(o.models_dir)) listed.push_back(std::move(m));
  if (listed.empty()) listed.push_back({});  // the default model
  o.model.model = listed.front().text;
  const ModelSessionOptions session_options = o.model.resolved();
  if (o.server.served_model_name.empty())
    o.server.served_model_name =
        listed.front().name.empty() ? served_name_of(o.model.model, session_options.model_path) : listed.front().name;
  o.engine = o.engine_flags.resolved();
  // The others: resolved now (a hub name is pulled at start, not under a request), loaded on first use.
  struct Lazy {
    std::string name;
    ModelSessionOptions session;
  };
  std::vector<Lazy> lazy;
  for (std::size_t i = 1; i < listed.size(); ++i) {
    ModelOptions m = o.model;
    m.model = listed[i].text;
    Lazy l{listed[i].name, m.resolved()};
    if (l.name.empty()) l.name = served_name_of(listed[i].text, l.session.model_path);
    lazy.push_back(std::move(l));
  }
  if (!lazy.empty() && o.engine_flags.speculative.method.starts_with("draft:"))
    fail("--speculative {} names a draft for one model, but several are served; serve one model with it",
         o.engine_flags.speculative.method);
  if (!lazy.empty() && !o.kv_events.endpoint.empty())
    fail("--kv-events-endpoint publishes one model's cache, but several are served; serve one model with it");
  for (const std::string& text : o.cascades) {
    server::CascadeSpec c = server::parse_cascade_spec(text);
    c.threshold = o.cascade_threshold;
    c.measure = *server::parse_cascade_measure(o.cascade_measure);  // checked by the flag
    o.server.cascades.push_back(std::move(c));
  }
  server::ModelPoolLimits& limits = o.server.models;
  if (!o.models_memory.empty()) {
    const auto bytes = parse_byte_size(o.models_memory);
    if (!bytes || *bytes <= 0) fail("--models-memory \"{}\" is not a size; write it with a unit: 8GiB", o.models_memory);
    limits.max_bytes = *bytes;
  }
  limits.keep_alive = ms(o.model_keep_alive_s >= 0 ? o.model_keep_alive_s : (lazy.empty() ? 0 : 300));
  limits.load_wait = ms(o.model_load_timeout_s);
  // Bound before the model loads, so that a taken port fails at once.
  if (!o.kv_events.endpoint.empty()) {
    o.engine.kv_events = std::make_shared<server::KvEventPublisher>(o.kv_events);
    std::fprintf(stderr, "folio: publishing KV-cache events on %s (topic \"%s\")\n", o.kv_events.endpoint.c_str(),
                 o.kv_events.topic.c_str());
  }
  if (!o.chat_template_file.empty()) {
    std::ifstream in(o.chat_template_file, std::ios::binary);
    if (!in) fail("--chat-template {}: cannot read it", o.chat_template_file);
    o.server.chat_template.assign(std::istreambuf_iterator<char>(in), {});
    try {
      ChatTemplate check(o.server.chat_template);
    } catch (const Error& e) {
      fail("--chat-template {}: {}", o.chat_template_file, e.what());
    }
  }
  if (!o.chat_template_kwargs.empty()) {
    o.server.chat_template_kwargs = nlohmann::ordered_json::parse(o.chat_template_kwargs, nullptr, false);
    if (!o.server.chat_template_kwargs.is_object())
      fail("--chat-template-kwargs must be a JSON object, like '{{\"enable_thinking\": false}}'");
  }
  const char* env_key = std::getenv("FOLIO_API_KEY");
  o.server.api_keys =
      server::ApiKeys::load(o.api_keys, o.api_key_file, env_key ? std::optional<std::string>(env_key) : std::nullopt);
  server::HttpServerOptions& http = o.server.http;
  http.header_timeout = ms(o.header_timeout_s);
  http.body_timeout = ms(o.body_timeout_s);
  http.keep_alive_timeout = ms(o.keep_alive_timeout_s);
  http.write_timeout = ms(o.write_timeout_s);
  if (http.max_connections_per_client <= 0) http.max_connections_per_client = std::max(1, http.max_connections / 2);
  http.max_workers = http.max_connections;
  make_room_for_connections(http.max_connections);
  // The planner's "this machine": the streaming-read bandwidth of folio bench --suite bandwidth.
  o.server.web.measure_bandwidth = [] {
    return measure_read_bandwidth(256 << 20, static_cast<int>(std::thread::hardware_concurrency()), 5).max_gb_per_s *
           1e9;
  };

  server::ApiServer api(o.server);
  const int port = api.start();
  const std::string url = fmt::format("http://{}:{}", http.host, port);
  std::fprintf(stderr, "folio: listening on %s; loading %s\n", url.c_str(), session_options.model_path.c_str());

  // The model loads on a thread of its own so that a signal can still stop
  // the server while a large file is read.
  const auto load_start = std::chrono::steady_clock::now();
  auto loading = std::async(std::launch::async, [&o, &session_options] {
    std::shared_ptr<ModelSession> session = open_model(session_options);
    return std::make_shared<Engine>(session, o.engine);
  });
  while (loading.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    if (int sig = wait_signal(signals, std::chrono::milliseconds(100))) {
      std::fprintf(stderr, "folio: %s while loading the model; exiting\n", strsignal(sig));
      api.stop();
      std::fflush(stderr);
      std::_Exit(0);  // the loader cannot be interrupted; nothing else is in flight
    }
  }
  std::shared_ptr<Engine> engine;
  try {
    engine = loading.get();
  } catch (...) {
    api.stop();
    throw;
  }
  std::function<std::shared_ptr<Engine>()> reload;  // with several models the first may unload too
  if (!lazy.empty())
    reload = [session = session_options, config = o.engine] {
      return std::make_shared<Engine>(open_model_session(session), config);
    };
  api.set_engine(engine, session_options.model_path, std::move(reload));
  std::fprintf(stderr, "folio: %s\n", startup_budget(engine->session(), *engine).c_str());
  for (const Lazy& l : lazy) {
    const std::int64_t estimate = weight_bytes_on_disk(l.session.model_path) +
                                  static_cast<std::int64_t>(o.engine.kv_cache_bytes);
    api.add_model(l.name, l.session.model_path, estimate, [session = l.session, config = o.engine] {
      return std::make_shared<Engine>(open_model_session(session), config);
    });
  }
  for (const server::CascadeSpec& c : o.server.cascades) {
    for (const std::string& name : {c.small, c.large})
      if (!api.models().has(name)) {
        api.stop();
        fail("--cascade {}: {} is not a served model; serve it with -m (NAME=MODEL names it)", c.name, name);
      }
    if (api.models().has(c.name)) {
      api.stop();
      fail("--cascade {}: a served model has that name already", c.name);
    }
    std::fprintf(stderr, "folio: %s is a cascade: %s answers, %s when the answer's score (%s) is below %g\n",
                 c.name.c_str(), c.small.c_str(), c.large.c_str(), server::cascade_measure_name(c.measure), c.threshold);
  }
  if (!lazy.empty()) {
    std::string listing;
    for (const server::ModelStatus& m : api.models().status())
      listing += fmt::format("\n  {} ({}, {}{})", m.name, m.source,
                             m.state == server::ModelState::kLoaded ? "loaded, " : "on first use, about ", gib(m.num_bytes));
    std::fprintf(stderr, "folio: serving %zu models, routed by the request's `model`:%s\n", lazy.size() + 1,
                 listing.c_str());
    std::fprintf(stderr, "folio: at most %s loaded at once%s; an idle one unloads after %s\n",
                 limits.max_loaded > 0 ? std::to_string(limits.max_loaded).c_str() : "all",
                 limits.max_bytes > 0 ? fmt::format(" within {} (--models-memory)", gib(limits.max_bytes)).c_str() : "",
                 limits.keep_alive.count() > 0 ? fmt::format("{:.0f} s", limits.keep_alive.count() / 1000.0).c_str()
                                               : "never");
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const KvUsage kv = engine->stats().kv;
  std::fprintf(stderr,
               "folio: serving %s at %s/v1 (ready in %.1f s; context %d tokens, KV cache %d blocks of %d tokens in "
               "%s, %.1f MiB, %zu connections)\n",
               o.server.served_model_name.c_str(), url.c_str(), load_s, engine->max_model_len(), kv.num_blocks,
               kv.block_size, o.engine.kv_dtype.name().c_str(),
               static_cast<double>(engine->stats().kv_bytes) / (1 << 20),
               static_cast<std::size_t>(http.max_connections));
  engine.reset();  // the pool holds it while it is loaded, and may unload it
  if (o.server.web.enabled)
    std::fprintf(stderr, "folio: the web page (chat, \"How big is the cache?\", the engine live) is at %s/\n",
                 url.c_str());

  int sig = 0;
  while ((sig = wait_signal(signals, std::chrono::milliseconds(1000))) == 0) api.models().sweep_idle();
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.shutdown_timeout_s * 1000));
  std::fprintf(stderr, "folio: %s received; finishing running requests (up to %.0f s)\n", strsignal(sig),
               o.shutdown_timeout_s);
  api.begin_drain();
  bool finished = true;
  const auto drain_start = std::chrono::steady_clock::now();
  for (const auto& served : api.models().loaded()) {
    const auto spent = std::chrono::steady_clock::now() - drain_start;
    finished = served->engine->drain(std::max(std::chrono::milliseconds(0),
                                              timeout - std::chrono::duration_cast<std::chrono::milliseconds>(spent))) &&
               finished;
  }
  // The engine is done; give the HTTP threads a moment to write the last events.
  api.wait_until_idle(std::chrono::seconds(5));
  api.stop();
  std::fprintf(stderr, "folio: stopped%s\n", finished ? "" : " (requests still running at the timeout were aborted)");
}

}  // namespace

void add_serve(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  auto o = std::make_shared<ServeOptions>();
  add_model_options(cmd, o->model, /*several=*/true);
  server::ServerOptions& s = o->server;
  EngineConfig& e = o->engine_flags.config;
  server::HttpServerOptions& h = s.http;
  h.max_connections_per_client = 0;  // half of --max-connections unless given
  cmd->add_option("--host", h.host, "Address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)");
  cmd->add_option("--port", h.port, "Port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_keys,
                  "Require `Authorization: Bearer KEY` (repeat for several keys; GET /health and /version stay "
                  "open). Visible in ps: prefer --api-key-file or FOLIO_API_KEY");
  cmd->add_option("--api-key-file", o->api_key_file, "File of API keys, one per line (# starts a comment)");
  cmd->add_option("--served-model-name", s.served_model_name,
                  "The (first) model's name in the API (default: the file name without .gguf)");
  cmd->add_option("--models-dir", o->models_dir,
                  "Serve every model in this folder too (GGUF files, Hugging Face folders), each under its file name, "
                  "loaded when a request first names it");
  cmd->add_option("--max-loaded-models", s.models.max_loaded,
                  "With several models: how many stay loaded at once; the least recently used unloads for a newcomer "
                  "(default: no cap)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--models-memory", o->models_memory,
                  "With several models: the bytes (weights and KV cache) loaded models may hold together, with a "
                  "unit, e.g. 12GiB (default: no budget)");
  cmd->add_option("--model-keep-alive", o->model_keep_alive_s,
                  "With several models: seconds a model may sit idle before it unloads; 0: never (default 300)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cascade", o->cascades,
                  "NAME=SMALL,LARGE: a model name whose chat requests SMALL answers first and LARGE only when "
                  "SMALL is unsure (lossy; both must be served models); repeatable")
      ->type_name("NAME=SMALL,LARGE");
  cmd->add_option("--cascade-threshold", o->cascade_threshold,
                  "A small answer whose score is below this goes to the large model (default: the value "
                  "bench/cascade_eval.py chose for the packaged Qwen2.5-Coder pair); a request may set "
                  "cascade_threshold");
  cmd->add_option("--cascade-measure", o->cascade_measure,
                  "The small answer's score: margin (the smallest gap between a token's top two log-probabilities, "
                  "default: it told right from wrong best), min (its least likely token's log-probability) or mean")
      ->check(CLI::IsMember({"min", "mean", "margin"}));
  cmd->add_option("--model-load-timeout", o->model_load_timeout_s,
                  "Seconds a request waits for its model to load before it gets 503 (default 300)")
      ->check(CLI::PositiveNumber);
  add_engine_options(cmd, o->engine_flags);
  cmd->add_option("--max-waiting", e.max_waiting, "Requests queued before new ones get 429")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-n", s.max_n, "Most completions per prompt (n) a request may ask for")
      ->check(CLI::Range(1, kMaxCompletions));
  cmd->add_option("--max-choices-per-request", s.max_choices_per_request,
                  "Most completions (prompts x n) one request may ask for (default 64)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-stored-responses", s.max_stored_responses,
                  "Responses API: stored responses kept for GET /v1/responses/{id} and previous_response_id, the "
                  "newest first (default 1024; 0: none; with at most 256 MiB of them in all)");
  cmd->add_option("--max-choices-per-client", s.max_choices_per_client,
                  "Completions one client address may have queued or running (default: half of --max-waiting)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--allow-special-in-messages", s.allow_special_in_messages,
                "Read special tokens (<|im_start|>, ...) written in chat messages as those tokens, as before; "
                "unsafe: a user can then forge a system turn");
  cmd->add_option("--chat-template", o->chat_template_file,
                  "A Jinja chat template file to render chats with instead of the model's own");
  cmd->add_option("--chat-template-kwargs", o->chat_template_kwargs,
                  "Template variables every chat gets unless it sets them, as a JSON object "
                  "('{\"enable_thinking\": false}')");
  cmd->add_option("--allowed-origins", s.allowed_origins,
                  "Origins a browser page may call this server from (CORS), e.g. http://localhost:3000; * for any "
                  "(default: none)")
      ->delimiter(',');
  cmd->add_option("--reasoning-parser", s.reasoning_parser,
                  "Split <think> text out of chat answers into reasoning_content: auto (default: when the chat "
                  "template thinks in <think> tags), think (always), none")
      ->check(CLI::IsMember({"auto", "think", "none"}));
  cmd->add_option("--max-body-bytes", h.limits.max_body_bytes,
                  "Largest request body, after chunked decoding (default 16 MiB)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-header-bytes", h.limits.max_header_bytes,
                  "Largest request header: the request line and all fields (default 32 KiB)")
      ->check(CLI::Range(1024, 1 << 20));
  cmd->add_option("--max-pending-body-bytes", h.max_pending_body_bytes,
                  "Request body bytes held at once over all connections, until parsed (default 64 MiB); more get 503")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", h.max_connections,
                  "Connections open at once (default 1024); a newcomer past it closes the longest-idle keep-alive "
                  "connection, or is refused with 503")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-connections-per-client", h.max_connections_per_client,
                  "Connections open at once from one address (default: half of --max-connections); more get 429")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--header-timeout", o->header_timeout_s,
                  "Seconds a client has to send a request's whole header, from its first byte (default 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--body-timeout", o->body_timeout_s, "Seconds a client has to send a request's body (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--keep-alive-timeout", o->keep_alive_timeout_s,
                  "Seconds an idle connection is kept open between requests (default 5)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--write-timeout", o->write_timeout_s,
                  "Seconds a client may read nothing of its answer before it counts as gone (default 30)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout_s,
                  "Seconds running requests get to finish after SIGTERM (default 30)")
      ->check(CLI::NonNegativeNumber);
  o->kv_events.endpoint.clear();  // off unless asked for
  cmd->add_option("--kv-events-endpoint", o->kv_events.endpoint,
                  "Publish KV-cache events (BlockStored, BlockRemoved, AllBlocksCleared; vLLM's msgpack format) on "
                  "a ZeroMQ PUB socket, for prefix-aware routers: tcp://*:5557 listens, tcp://HOST:PORT connects "
                  "(default: off)");
  cmd->add_option("--kv-events-topic", o->kv_events.topic,
                  "The topic frame of every KV event message (default: empty)");
  cmd->add_flag(
      "--no-web-page", [s = &o->server](std::int64_t) { s->web.enabled = false; },
      "Serve no web page: GET / (chat, capacity planner, live engine view), /web/ and /api/ answer 404");
  cmd->add_flag(
      "--no-request-log", [s = &o->server](std::int64_t) { s->log_requests = false; },
      "Do not log one line per request");
  cmd->callback([o] { serve(*o); });
}

}  // namespace folio::cli
