// `folio perplexity`: a model's perplexity over a text file, in the windows
// llama-perplexity uses (see engine/perplexity.h).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "engine/perplexity.h"

namespace folio::cli {
namespace {

struct PerplexityCliOptions {
  ModelOptions model;
  std::string file;
  PerplexityOptions ppl;
  std::string kv_dtype = "f16";
};

void run(const PerplexityCliOptions& o) {
  std::ifstream in(o.file, std::ios::binary);
  if (!in) fail("cannot read {}", o.file);
  std::stringstream text;
  text << in.rdbuf();
  auto session = open_model(o.model);
  std::vector<TokenId> tokens = session->tokenizer->encode(text.str(), /*add_special=*/true, /*parse_special=*/false);
  PerplexityOptions options = o.ppl;
  options.kv_dtype = kv_cache_dtype_from_flag(o.kv_dtype);
  std::fprintf(stderr, "%s: %zu tokens, ctx %lld%s\n", o.file.c_str(), tokens.size(), static_cast<long long>(options.ctx),
               options.stride > 0 ? fmt::format(", stride {}", options.stride).c_str() : "");
  const auto start = std::chrono::steady_clock::now();
  PerplexityResult r = compute_perplexity(*session, tokens, options, [](std::int64_t done, std::int64_t total, double ppl) {
    std::fprintf(stdout, "[%lld]%.4f,", static_cast<long long>(done), ppl);
    std::fflush(stdout);
    if (done == total) std::fputs("\n", stdout);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r.perplexity(), r.perplexity_error());
  std::fprintf(stderr, "%lld windows, %lld tokens scored, %.1f s (%.1f tok/s)\n", static_cast<long long>(r.num_chunks),
               static_cast<long long>(r.count), seconds,
               static_cast<double>(r.num_chunks * options.ctx) / seconds);
}

}  // namespace

void add_perplexity(CLI::App& app) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a model over a text file (llama-perplexity's windows)");
  auto o = std::make_shared<PerplexityCliOptions>();
  add_model_options(cmd, o->model);
  cmd->add_option("-f,--file", o->file, "Text file")->required();
  cmd->add_option("-c,--ctx", o->ppl.ctx, "Tokens per window");
  cmd->add_option("--stride", o->ppl.stride, "Sliding windows every S tokens (0: llama-perplexity's chunks)");
  cmd->add_option("--chunks", o->ppl.max_chunks, "Evaluate at most this many windows (0: all)");
  cmd->add_option("-b,--batch", o->ppl.batch, "Tokens per forward pass");
  cmd->add_option("--kv-cache-dtype", o->kv_dtype, kKvCacheDTypeHelp);
  cmd->callback([o] { run(*o); });
}

}  // namespace folio::cli
