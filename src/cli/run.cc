// `folio run`: generate text from a prompt with one model on this machine,
// streaming it as it comes, then one summary line.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "kv/kv_storage.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/incremental_decoder.h"

namespace folio::cli {
namespace {

struct RunOptions {
  ModelOptions model;
  std::string prompt = "Tell me a short story about a robot who learns to paint.";
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
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void run(const RunOptions& o) {
  std::shared_ptr<ModelSession> session = open_model(o.model);
  ModelSession& s = *session;
  const ModelConfig& config = s.loaded.config;
  const Vocab& vocab = s.tokenizer->vocab();

  std::string text = o.prompt;
  if (o.chat) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
    messages.push_back({{"role", "user"}, {"content", o.prompt}});
    ChatRenderOptions render;
    render.bos_token = vocab.bos_id >= 0 ? vocab.tokens[vocab.bos_id] : "";
    render.eos_token = vocab.eos_id >= 0 ? vocab.tokens[vocab.eos_id] : "";
    text = s.chat_template->render(messages, render);
  }
  std::vector<TokenId> prompt = s.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/o.chat);
  if (prompt.empty()) fail("the prompt is empty after tokenization; give some text with -p");
  const std::int64_t limit = std::min<std::int64_t>(config.context_length, static_cast<std::int64_t>(prompt.size()) + o.max_tokens);
  if (static_cast<std::int64_t>(prompt.size()) >= config.context_length)
    fail("the prompt has {} tokens but the context holds {}; shorten it", prompt.size(), config.context_length);

  KvStorageOptions kv_options;
  kv_options.dtype = *parse_dtype(o.kv_dtype);
  kv_options.num_blocks = (limit + kv_options.block_size - 1) / kv_options.block_size;
  KvStorage kv(*s.backend, config, kv_options);
  // One sequence owns every block, in order: the simplest allocator there is.
  std::vector<std::int32_t> block_table(static_cast<std::size_t>(kv.num_blocks()));
  for (std::size_t i = 0; i < block_table.size(); ++i) block_table[i] = static_cast<std::int32_t>(i);
  ModelRunner runner(*s.backend, *s.loaded.model, kv, o.batch, 1, 1);

  SamplingParams params;
  params.temperature = o.temperature;
  params.top_k = o.top_k;
  params.top_p = o.top_p;
  params.min_p = o.min_p;
  params.repetition_penalty = o.repeat_penalty;
  std::int64_t seed = o.seed >= 0 ? o.seed : static_cast<std::int64_t>(std::random_device{}() >> 1);
  params.seed = seed;
  if (auto problem = params.validate(config.vocab_size)) fail("{}", *problem);
  Sampler sampler;
  SamplingRng rng = SamplingRng::from_seed(seed);
  TokenCounts prompt_counts(prompt), output_counts;
  IncrementalDecoder decoder(*s.tokenizer, /*render_special=*/false);

  // Prefill in chunks of --batch tokens; only the last chunk needs logits.
  auto prefill_start = std::chrono::steady_clock::now();
  std::int64_t done = 0;
  Tensor logits;
  while (done < static_cast<std::int64_t>(prompt.size())) {
    std::int64_t n = std::min<std::int64_t>(o.batch, static_cast<std::int64_t>(prompt.size()) - done);
    SequenceChunk chunk;
    chunk.tokens = std::span<const TokenId>(prompt).subspan(done, n);
    chunk.num_computed_tokens = done;
    chunk.block_table = block_table;
    chunk.num_logits = done + n == static_cast<std::int64_t>(prompt.size()) ? 1 : 0;
    logits = runner.execute(std::span<const SequenceChunk>(&chunk, 1));
    done += n;
  }
  const double prefill_s = seconds_since(prefill_start);

  auto decode_start = std::chrono::steady_clock::now();
  std::vector<TokenId> output;
  std::fputs(o.chat ? "" : o.prompt.c_str(), stdout);
  while (true) {
    std::span<const float> row(runner.host_logits(logits), static_cast<std::size_t>(config.vocab_size));
    SampledToken next = sampler.sample(row, params, prompt_counts, output_counts, rng);
    if (vocab.is_end_of_generation(next.token)) break;
    output.push_back(next.token);
    output_counts.add(next.token);
    std::fputs(decoder.push(next.token).c_str(), stdout);
    std::fflush(stdout);
    const std::int64_t position = static_cast<std::int64_t>(prompt.size() + output.size()) - 1;
    if (position + 1 >= limit) break;
    SequenceChunk chunk;
    chunk.tokens = std::span<const TokenId>(&output.back(), 1);
    chunk.num_computed_tokens = position;
    chunk.block_table = block_table;
    chunk.num_logits = 1;
    logits = runner.execute(std::span<const SequenceChunk>(&chunk, 1));
  }
  std::fputs(decoder.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  const double decode_s = seconds_since(decode_start);
  // Decode speed counts the forward passes after the first token.
  const double decode_tps = output.size() > 1 ? static_cast<double>(output.size() - 1) / decode_s : 0.0;
  std::fprintf(stderr,
               "prompt %zu tokens, generated %zu tokens, load %.2f s, prefill %.1f tok/s, decode %.1f tok/s, "
               "peak memory %.0f MiB, seed %lld\n",
               prompt.size(), output.size(), s.load_seconds, static_cast<double>(prompt.size()) / prefill_s,
               decode_tps, static_cast<double>(peak_rss_bytes()) / (1 << 20), static_cast<long long>(seed));
}

}  // namespace

void add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  auto o = std::make_shared<RunOptions>();
  add_model_options(cmd, o->model);
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_option("-n,--max-tokens", o->max_tokens, "Most tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--temp", o->temperature, "Temperature (0: greedy)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", o->top_k, "Top-k (0: off)");
  cmd->add_option("--top-p", o->top_p, "Top-p (1: off)");
  cmd->add_option("--min-p", o->min_p, "Min-p (0: off)");
  cmd->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1: off)");
  cmd->add_option("--seed", o->seed, "Random seed (default: random, printed at the end)");
  cmd->add_flag("--chat", o->chat, "Apply the model's chat template to the prompt");
  cmd->add_option("--system", o->system, "System message for --chat");
  cmd->add_option("-b,--batch", o->batch, "Prefill chunk size in tokens")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-cache-dtype", o->kv_dtype, "KV cache element type: f16, bf16 or f32")
      ->check(CLI::IsMember({"f16", "bf16", "f32"}));
  cmd->callback([o] { run(*o); });
}

}  // namespace folio::cli
