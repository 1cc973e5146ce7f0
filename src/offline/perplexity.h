// Perplexity of a model over a token stream, in the windows llama.cpp's
// llama-perplexity uses, so the two report comparable figures:
// - default: consecutive chunks of ctx tokens, each evaluated from an empty
//   cache with its first token replaced by BOS (when the vocab adds one);
//   the second half of each chunk is scored;
// - stride s: windows of ctx tokens starting every s tokens; the last s
//   predictions of each window are scored.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/model_session.h"
#include "tensor/kv_dtype.h"

namespace folio {

struct PerplexityOptions {
  std::int64_t ctx = 512;        // tokens per window
  std::int64_t stride = 0;       // 0: llama-perplexity's chunks; > 0: sliding windows
  std::int64_t max_chunks = 0;   // 0: all that the text holds
  std::int64_t batch = 512;      // tokens per forward pass
  KvCacheDType kv_dtype;         // K and V cache types (f16 both by default)
  KvCacheDType base_kv_dtype;    // compute_kl_divergence: the base model's cache types
};

struct PerplexityResult {
  double nll_sum = 0;           // sum of -log p(token) over scored tokens (nats)
  double nll_sq_sum = 0;        // sum of its squares, for the standard error
  std::int64_t count = 0;       // scored tokens
  std::int64_t num_chunks = 0;  // windows evaluated
  std::vector<double> running;  // perplexity after each window
  double perplexity() const;
  // The standard error of the perplexity (from the spread of per-token NLLs).
  double perplexity_error() const;
};

// Calls progress(windows done, windows in all, running perplexity) after each window.
using PerplexityProgress = std::function<void(std::int64_t, std::int64_t, double)>;

// Throws Error when the text is too short for even one window (it says how
// many tokens are needed).
PerplexityResult compute_perplexity(ModelSession& session, std::span<const TokenId> tokens,
                                    const PerplexityOptions& options, const PerplexityProgress& progress = {});

// How far a model's next-token distributions are from a base model's (the
// same model before quantization, say) over the same windows: KL(base || model)
// per scored position, and how often both rank the same token first.
struct KlDivergenceResult {
  PerplexityResult base;          // the base model's perplexity over the windows
  PerplexityResult model;         // the model's
  double kld_sum = 0;             // nats
  double kld_sq_sum = 0;
  std::int64_t count = 0;         // scored positions
  std::int64_t same_top = 0;      // positions where both models' top token agrees
  std::vector<double> values;     // KL divergence of each scored position
  double mean() const;
  double mean_error() const;      // standard error of the mean
  double quantile(double q) const;  // of the per-position values, q in [0, 1]
  double same_top_fraction() const;
};

// Runs both models over the windows of `tokens` (see PerplexityOptions);
// progress reports the running mean KL divergence. Throws Error when the
// vocabularies differ in size.
KlDivergenceResult compute_kl_divergence(ModelSession& base, ModelSession& model, std::span<const TokenId> tokens,
                                         const PerplexityOptions& options, const PerplexityProgress& progress = {});

// -log softmax(logits)[token], in double precision.
double negative_log_likelihood(std::span<const float> logits, TokenId token);

}  // namespace folio
