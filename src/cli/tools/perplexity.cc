// `folio perplexity`: a model's perplexity over a text file, in the windows
// llama-perplexity uses (see engine/perplexity.h).
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "core/error.h"
#include "core/read_file.h"
#include "offline/perplexity.h"

namespace folio::cli {
namespace {

struct PerplexityCliOptions {
  ModelOptions model;
  std::string file;
  PerplexityOptions ppl;
  std::string kv_dtype = "f16";
  std::string kl_base;  // --kl-divergence BASE_MODEL
  std::string base_kv_dtype = "f16";
  std::string base_precision;  // --base-precision; empty: -m's
};

void print_kl_divergence(const KlDivergenceResult& r) {
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r.model.perplexity(), r.model.perplexity_error());
  std::printf("Base PPL:       %.4f +/- %.5f\n", r.base.perplexity(), r.base.perplexity_error());
  std::printf("ln(PPL/base):   %+.5f\n", std::log(r.model.perplexity() / r.base.perplexity()));
  std::printf("Mean KLD:       %.6f +/- %.6f\n", r.mean(), r.mean_error());
  std::printf("Median KLD:     %.6f\n", r.quantile(0.5));
  std::printf("99.0%% KLD:      %.6f\n", r.quantile(0.99));
  std::printf("Maximum KLD:    %.6f\n", r.quantile(1.0));
  const double same = r.same_top_fraction();
  const double se = r.count > 1 ? std::sqrt(same * (1 - same) / static_cast<double>(r.count - 1)) : 0.0;
  std::printf("Same top p:     %.3f +/- %.3f %%\n", 100 * same, 100 * se);
}

void run(const PerplexityCliOptions& o) {
  const std::string text = read_file(o.file);
  auto session = open_model(o.model);
  std::vector<TokenId> tokens = session->tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/false);
  PerplexityOptions options = o.ppl;
  options.kv_dtype = kv_cache_dtype_from_flag(o.kv_dtype);
  options.base_kv_dtype = kv_cache_dtype_from_flag(o.base_kv_dtype);
  std::fprintf(stderr, "%s: %zu tokens, ctx %lld%s\n", o.file.c_str(), tokens.size(), static_cast<long long>(options.ctx),
               options.stride > 0 ? fmt::format(", stride {}", options.stride).c_str() : "");
  const auto start = std::chrono::steady_clock::now();
  if (!o.kl_base.empty()) {
    ModelOptions base_options = o.model;
    base_options.model = o.kl_base;
    if (!o.base_precision.empty()) base_options.session.backend.precision = o.base_precision;
    auto base = open_model(base_options);
    const bool tty = ::isatty(STDERR_FILENO) == 1;  // a live line at a terminal, one line per window in a log
    KlDivergenceResult r = compute_kl_divergence(*base, *session, tokens, options,
                                                 [tty](std::int64_t done, std::int64_t total, double kld) {
      std::fprintf(stderr, "%s[%lld/%lld] mean KLD %.6f%s", tty ? "\r" : "", static_cast<long long>(done),
                   static_cast<long long>(total), kld, !tty || done == total ? "\n" : "");
    });
    print_kl_divergence(r);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%lld windows, %lld tokens scored against %s, %.1f s\n", static_cast<long long>(r.model.num_chunks),
                 static_cast<long long>(r.count), o.kl_base.c_str(), seconds);
    return;
  }
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
  cmd->add_option("--kl-divergence", o->kl_base,
                  "BASE_MODEL: also run this model (e.g. the unquantized one) and report the KL divergence of -m's "
                  "next-token distributions from it, and how often their top tokens agree");
  cmd->add_option("--base-kv-cache-dtype", o->base_kv_dtype,
                  "KV cache types of the --kl-divergence model (default f16; with -m the same file, this measures "
                  "what a quantized KV cache costs)");
  cmd->add_option("--base-precision", o->base_precision,
                  "Matmul activations of the --kl-divergence model, q8 or f32 (default: -m's --precision; with -m the "
                  "same file and f32 here, this measures what the q8 fast path costs)");
  cmd->callback([o] { run(*o); });
}

}  // namespace folio::cli
