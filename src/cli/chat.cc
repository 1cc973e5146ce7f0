// `folio chat` (and `folio run` without -p in a terminal): a conversation in
// the terminal with a model on this machine, or with a server (--url, any
// OpenAI-compatible one): history, streamed answers, multi-line input ("""
// ... """, or a line ending in \), /clear, /system, /save, /exit, and Ctrl-C
// that stops the answer being written, not the program (at the prompt it
// drops the line; Ctrl-D or /exit leaves).
#include "cli/chat.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "engine/engine.h"
#include "server/api/chat_prompt.h"

namespace folio::cli {
namespace {

using Json = nlohmann::ordered_json;

std::atomic<bool> g_interrupted{false};  // set by SIGINT; the one piece of global state a signal needs

void on_sigint(int) { g_interrupted.store(true); }

// SIGINT sets the flag (and interrupts a blocking read) for as long as it lives.
class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt returns EINTR
    sigaction(SIGINT, &sa, &old_);
  }
  ~InterruptGuard() { sigaction(SIGINT, &old_, nullptr); }

 private:
  struct sigaction old_ = {};
};

// One line of stdin without its newline; nullopt at end of input. A Ctrl-C
// while waiting gives an empty `interrupted` line.
std::optional<std::string> read_line(bool& interrupted) {
  std::string line;
  interrupted = false;
  for (;;) {
    char c = 0;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) {
      if (c == '\n') return line;
      line += c;
      continue;
    }
    if (n < 0 && errno == EINTR) {
      if (g_interrupted.exchange(false)) {
        interrupted = true;
        return std::string();
      }
      continue;
    }
    if (line.empty()) return std::nullopt;
    return line;
  }
}

// Streams an answer to a conversation: on_text for each piece; returns when
// the answer ends, or soon after a Ctrl-C (which it leaves set).
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void answer(const Json& messages, const std::function<void(const std::string&)>& on_text) = 0;
};

// A model on this machine, through its own engine.
class LocalResponder final : public Responder {
 public:
  LocalResponder(std::shared_ptr<ModelSession> session, const ChatOptions& o) : session_(std::move(session)), o_(o) {
    EngineConfig e;
    e.max_num_seqs = 1;
    e.max_model_len = static_cast<int>(std::min<std::int64_t>(session_->config().context_length, o.context_tokens));
    engine_ = std::make_unique<Engine>(session_, e);
    seed_ = o.seed >= 0 ? o.seed : static_cast<std::int64_t>(std::random_device{}() >> 1);
  }

  void answer(const Json& messages, const std::function<void(const std::string&)>& on_text) override {
    std::vector<server::ChatMessage> turns;
    for (const Json& m : messages) turns.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    ChatRenderOptions options = chat_render_options(session_->tokenizer->vocab());
    options.add_generation_prompt = true;
    EngineRequest request;
    request.prompt = server::encode_chat(*session_->chat_template, *session_->tokenizer, turns, options,
                                         /*add_special_tokens=*/false, /*allow_special=*/false);
    if (static_cast<std::int64_t>(request.prompt.size()) + 1 >= engine_->max_model_len())
      fail("the conversation has {} tokens and the context holds {}; /clear it, or start with a larger --ctx",
           request.prompt.size(), engine_->max_model_len());
    SamplingParams& p = request.params;
    p.temperature = o_.temperature;
    p.top_p = o_.top_p;
    p.max_tokens = o_.max_tokens;
    p.seed = seed_++;
    auto stream = engine_->submit(std::move(request));
    bool aborted = false;
    for (;;) {
      if (g_interrupted.load() && !aborted) {
        engine_->abort(stream->id());  // its last output still comes, finished
        aborted = true;
      }
      auto out = stream->next(std::chrono::milliseconds(50));
      if (!out) continue;
      for (const CompletionDelta& d : out->deltas) on_text(d.text);
      if (out->finished) return;
    }
  }

 private:
  std::shared_ptr<ModelSession> session_;
  const ChatOptions& o_;
  std::unique_ptr<Engine> engine_;
  std::int64_t seed_ = 0;
};

// An OpenAI-compatible server: POST /v1/chat/completions with stream, read
// as server-sent events.
class RemoteResponder final : public Responder {
 public:
  explicit RemoteResponder(const ChatOptions& o) : o_(o) { curl_global_init(CURL_GLOBAL_DEFAULT); }

  void answer(const Json& messages, const std::function<void(const std::string&)>& on_text) override {
    Json body = {{"messages", messages},
                 {"stream", true},
                 {"max_tokens", o_.max_tokens},
                 {"temperature", o_.temperature},
                 {"top_p", o_.top_p}};
    if (!o_.remote_model.empty()) body["model"] = o_.remote_model;
    if (o_.seed >= 0) body["seed"] = o_.seed;
    const std::string text = body.dump();
    std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
    if (!curl) fail("could not start an HTTP transfer");
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    const std::string auth = "Authorization: Bearer " + o_.api_key;
    if (!o_.api_key.empty()) headers = curl_slist_append(headers, auth.c_str());
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);
    Sse sse{&on_text, {}, {}, false};
    const std::string url = o_.url + "/v1/chat/completions";
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, text.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sse);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    const CURLcode code = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (code == CURLE_ABORTED_BY_CALLBACK) return;  // Ctrl-C: the server sees the connection close
    if (code != CURLE_OK) fail("could not reach {}: {}", o_.url, curl_easy_strerror(code));
    if (status != 200) {
      const auto error = Json::parse(sse.raw, nullptr, false);
      const std::string message = !error.is_discarded() && error.contains("error") && error["error"].is_object()
                                      ? error["error"].value("message", sse.raw)
                                      : sse.raw;
      fail("{} answered {}: {}", url, status, message);
    }
  }

 private:
  struct Sse {
    const std::function<void(const std::string&)>* on_text;
    std::string pending;  // bytes of an event not yet ended
    std::string raw;      // the first bytes, for an error body
    bool done;
  };

  static std::size_t on_data(char* data, std::size_t size, std::size_t count, void* user) {
    auto* s = static_cast<Sse*>(user);
    const std::size_t n = size * count;
    if (s->raw.size() < 4096) s->raw.append(data, std::min<std::size_t>(n, 4096 - s->raw.size()));
    s->pending.append(data, n);
    for (std::size_t end; (end = s->pending.find('\n')) != std::string::npos;) {
      std::string line = s->pending.substr(0, end);
      s->pending.erase(0, end + 1);
      if (!line.starts_with("data: ")) continue;
      line.erase(0, 6);
      if (line == "[DONE]") {
        s->done = true;
        continue;
      }
      const auto chunk = Json::parse(line, nullptr, false);
      if (chunk.is_discarded() || !chunk.contains("choices") || !chunk["choices"].is_array() ||
          chunk["choices"].empty())
        continue;
      const Json& delta = chunk["choices"][0]["delta"];
      if (delta.is_object() && delta.contains("content") && delta["content"].is_string())
        (*s->on_text)(delta["content"].get<std::string>());
    }
    return n;
  }

  static int on_progress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return g_interrupted.load() ? 1 : 0;  // nonzero aborts the transfer
  }

  const ChatOptions& o_;
};

constexpr const char* kHelp =
    "  /clear         forget the conversation (the system message stays)\n"
    "  /system TEXT   set the system message (and forget the conversation)\n"
    "  /save FILE     write the conversation as JSON\n"
    "  /exit, /bye    leave (so does Ctrl-D)\n"
    "  \"\"\"           start or end a message of several lines (or end a line with \\)\n"
    "  Ctrl-C         stop the answer being written; at the prompt, drop the line\n";

}  // namespace

void run_chat(const ChatOptions& o) {
  // The engine's threads start with SIGINT blocked, so that a Ctrl-C always
  // reaches this thread and interrupts its read at the prompt.
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigint, nullptr);
  std::unique_ptr<Responder> responder;
  if (!o.url.empty()) {
    responder = std::make_unique<RemoteResponder>(o);
  } else {
    responder = std::make_unique<LocalResponder>(open_model(o.model), o);
  }
  InterruptGuard guard;
  pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr);
  Json messages = Json::array();
  std::string system = o.system;
  auto reset = [&] {
    messages = Json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  };
  reset();
  std::fprintf(stderr, "folio chat: %s. /help for commands.\n",
               o.url.empty() ? "a model on this machine" : ("with " + o.url).c_str());
  for (;;) {
    std::fputs(">>> ", stdout);
    std::fflush(stdout);
    bool interrupted = false;
    std::optional<std::string> line = read_line(interrupted);
    if (!line) break;
    if (interrupted) {
      std::fputs("\n", stdout);
      continue;
    }
    std::string text = *line;
    // Several lines: """ ... """, or lines that end with a backslash.
    if (text.starts_with("\"\"\"")) {
      text.erase(0, 3);
      const bool closed_at_once = text.size() >= 3 && text.ends_with("\"\"\"");
      if (closed_at_once) {
        text.resize(text.size() - 3);
      } else {
        for (;;) {
          std::fputs("... ", stdout);
          std::fflush(stdout);
          std::optional<std::string> more = read_line(interrupted);
          if (!more || interrupted) break;
          if (more->ends_with("\"\"\"")) {
            text += (text.empty() ? "" : "\n") + more->substr(0, more->size() - 3);
            break;
          }
          text += (text.empty() ? "" : "\n") + *more;
        }
        if (interrupted) {
          std::fputs("\n", stdout);
          continue;
        }
      }
    } else {
      while (text.ends_with("\\")) {
        text.pop_back();
        std::fputs("... ", stdout);
        std::fflush(stdout);
        std::optional<std::string> more = read_line(interrupted);
        if (!more || interrupted) break;
        text += "\n" + *more;
      }
    }
    if (text.empty()) continue;
    if (text == "/exit" || text == "/bye") break;
    if (text == "/help" || text == "/?") {
      std::fputs(kHelp, stdout);
      continue;
    }
    if (text == "/clear") {
      reset();
      std::fputs("(the conversation is cleared)\n", stdout);
      continue;
    }
    if (text.starts_with("/system")) {
      system = text.size() > 7
                   ? text.substr(text.find_first_not_of(' ', 7) == std::string::npos ? text.size()
                                                                                     : text.find_first_not_of(' ', 7))
                   : "";
      reset();
      std::fputs(system.empty() ? "(no system message)\n" : "(system message set; the conversation is cleared)\n",
                 stdout);
      continue;
    }
    if (text.starts_with("/save")) {
      const std::size_t at = text.find_first_not_of(' ', 5);
      if (at == std::string::npos || text.size() <= 5 || text[5] != ' ') {
        std::fputs("usage: /save FILE\n", stdout);
        continue;
      }
      std::ofstream out(text.substr(at));
      out << messages.dump(2) << "\n";
      std::fputs(out ? fmt::format("(saved {} messages to {})\n", messages.size(), text.substr(at)).c_str()
                     : "(could not write that file)\n",
                 stdout);
      continue;
    }
    if (text.starts_with("/")) {
      std::fputs("unknown command; /help lists them\n", stdout);
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", text}});
    std::string reply;
    g_interrupted.store(false);
    try {
      responder->answer(messages, [&](const std::string& piece) {
        reply += piece;
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
      });
    } catch (const Error& e) {
      messages.erase(messages.size() - 1);
      std::fprintf(stdout, "\n(error: %s)\n", e.what());
      continue;
    }
    if (g_interrupted.exchange(false)) std::fputs(" [stopped]", stdout);
    std::fputs("\n", stdout);
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  std::fputs("\n", stdout);
}

void add_chat_options(CLI::App* cmd, ChatOptions& o) {
  add_model_options(cmd, o.model);
  cmd->add_option("--url", o.url, "Chat with this OpenAI-compatible server instead (http://HOST:PORT)");
  cmd->add_option("--api-key", o.api_key, "With --url: the server's API key");
  cmd->add_option("--server-model", o.remote_model, "With --url: the `model` field to send");
  cmd->add_option("--system", o.system, "System message");
  cmd->add_option("-n,--max-tokens", o.max_tokens, "Most tokens an answer may have")->check(CLI::PositiveNumber);
  cmd->add_option("--temp", o.temperature, "Temperature (0: greedy)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", o.top_p, "Top-p (1: off)");
  cmd->add_option("--seed", o.seed, "Random seed of the first answer (default: random)");
  cmd->add_option("--ctx", o.context_tokens, "The conversation's context in tokens (at most the model's)")
      ->check(CLI::PositiveNumber);
}

void add_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  auto* cmd = app.add_subcommand("chat", "Chat in the terminal with a model, or with a server (--url)");
  add_chat_options(cmd, *o);
  cmd->callback([o] { run_chat(*o); });
}

}  // namespace folio::cli
