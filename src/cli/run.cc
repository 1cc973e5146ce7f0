// `folio run`: generate text from a prompt with one model on this machine,
// streaming it as it comes, then one summary line. Without -p in a terminal
// it opens the terminal chat (cli/chat.cc), as `folio chat` does.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "cli/chat.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/speculative_options.h"
#include "cli/startup_budget.h"
#include "core/error.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace folio::cli {
namespace {

constexpr const char* kDefaultPrompt = "Tell me a short story about a robot who learns to paint.";

struct RunOptions {
  ModelOptions model;
  std::string prompt;  // empty: the chat in a terminal, kDefaultPrompt otherwise
  int max_tokens = 128;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  std::int64_t seed = -1;
  bool chat = false;
  std::string system;
  int batch = 512;
  std::string kv_dtype = "f16";
  SpeculativeOptions speculative;
};

void run(RunOptions o, bool max_tokens_given) {
  if (o.prompt.empty()) {
    if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
      ChatOptions chat;
      chat.model = o.model;
      chat.system = o.system;
      chat.temperature = o.temperature;
      chat.top_p = o.top_p;
      chat.seed = o.seed;
      if (max_tokens_given) chat.max_tokens = o.max_tokens;
      return run_chat(chat);
    }
    o.prompt = kDefaultPrompt;
  }
  std::shared_ptr<ModelSession> session = open_model(o.model);
  const ModelConfig& config = session->config();
  const Vocab& vocab = session->tokenizer->vocab();

  std::string text = o.prompt;
  if (o.chat) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
    messages.push_back({{"role", "user"}, {"content", o.prompt}});
    text = session->chat_template->render(messages, chat_render_options(vocab));
  }
  EngineRequest request;
  request.prompt = session->tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/o.chat);
  if (request.prompt.empty()) fail("the prompt is empty after tokenization; give some text with -p");
  const std::int64_t prompt_len = static_cast<std::int64_t>(request.prompt.size());

  // One sequence: the engine with a cache just large enough for it.
  EngineConfig e;
  e.max_num_seqs = 1;
  e.max_num_batched_tokens = o.batch;
  e.kv_dtype = kv_cache_dtype_from_flag(o.kv_dtype);
  e.max_model_len = static_cast<int>(std::min<std::int64_t>(config.context_length, prompt_len + o.max_tokens + 1));
  e.speculative = o.speculative.resolved();
  SamplingParams& params = request.params;
  params.temperature = o.temperature;
  params.top_k = o.top_k;
  params.top_p = o.top_p;
  params.min_p = o.min_p;
  params.repetition_penalty = o.repeat_penalty;
  params.max_tokens = o.max_tokens;
  const std::int64_t seed = o.seed >= 0 ? o.seed : static_cast<std::int64_t>(std::random_device{}() >> 1);
  params.seed = seed;
  Engine engine(session, e);
  std::fprintf(stderr, "folio: %s\n", startup_budget(*session, engine).c_str());

  std::fputs(o.chat ? "" : o.prompt.c_str(), stdout);
  const auto start = std::chrono::steady_clock::now();
  auto stream = engine.submit(std::move(request));
  std::optional<std::chrono::steady_clock::time_point> first_token;
  std::chrono::steady_clock::time_point last_token = start;
  int generated = 0;
  while (auto out = stream->next()) {
    if (!out->error.empty()) fail("{}", out->error);
    for (const CompletionDelta& d : out->deltas) {
      std::fputs(d.text.c_str(), stdout);
      generated += static_cast<int>(d.token_ids.size());
    }
    std::fflush(stdout);
    last_token = std::chrono::steady_clock::now();
    if (!first_token && generated > 0) first_token = last_token;
    if (out->finished) break;
  }
  std::fputs("\n", stdout);
  std::fflush(stdout);
  const double ttft = first_token ? std::chrono::duration<double>(*first_token - start).count() : 0.0;
  const double decode_s = first_token ? std::chrono::duration<double>(last_token - *first_token).count() : 0.0;
  // Decode speed counts the tokens after the first (the first comes with the prefill).
  const double decode_tps = generated > 1 && decode_s > 0 ? (generated - 1) / decode_s : 0.0;
  std::string spec;
  const EngineStats st = engine.stats();
  if (st.spec_proposed_tokens > 0)
    spec = fmt::format(", speculation accepted {}/{} proposals ({:.2f} tokens per step)", st.spec_accepted_tokens,
                       st.spec_proposed_tokens,
                       1.0 + static_cast<double>(st.spec_accepted_tokens) / static_cast<double>(st.spec_steps));
  std::fprintf(stderr,
               "prompt %lld tokens, generated %d tokens, load %.2f s, prefill %.1f tok/s, decode %.1f tok/s, "
               "peak memory %.0f MiB, seed %lld%s\n",
               static_cast<long long>(prompt_len), generated, session->load_seconds,
               ttft > 0 ? static_cast<double>(prompt_len) / ttft : 0.0, decode_tps,
               static_cast<double>(peak_rss_bytes()) / (1 << 20), static_cast<long long>(seed), spec.c_str());
}

}  // namespace

void add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  auto o = std::make_shared<RunOptions>();
  add_model_options(cmd, o->model);
  cmd->add_option("-p,--prompt", o->prompt,
                  "Prompt text (without one: a chat in a terminal, as folio chat; a story prompt otherwise)");
  auto* max_tokens = cmd->add_option("-n,--max-tokens", o->max_tokens, "Most tokens to generate")
                         ->check(CLI::PositiveNumber);
  cmd->add_option("--temp", o->temperature, "Temperature (0: greedy)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", o->top_k, "Top-k (0: off)");
  cmd->add_option("--top-p", o->top_p, "Top-p (1: off)");
  cmd->add_option("--min-p", o->min_p, "Min-p (0: off)");
  cmd->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1: off)");
  cmd->add_option("--seed", o->seed, "Random seed (default: random, printed at the end)");
  cmd->add_flag("--chat", o->chat, "Apply the model's chat template to the prompt");
  cmd->add_option("--system", o->system, "System message for --chat");
  cmd->add_option("-b,--batch", o->batch, "Prefill chunk size in tokens")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-dtype", o->kv_dtype, kKvCacheDTypeHelp);
  add_speculative_options(cmd, o->speculative);
  cmd->callback([o, max_tokens] { run(*o, max_tokens->count() > 0); });
}

}  // namespace folio::cli
