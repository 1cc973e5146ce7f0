#include "offline/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/model_runner.h"
#include "kv/kv_storage.h"

namespace folio {

double PerplexityResult::perplexity() const { return count > 0 ? std::exp(nll_sum / static_cast<double>(count)) : 0.0; }

double PerplexityResult::perplexity_error() const {
  if (count < 2) return 0.0;
  const double mean = nll_sum / static_cast<double>(count);
  const double var = std::max(0.0, nll_sq_sum / static_cast<double>(count) - mean * mean);
  return perplexity() * std::sqrt(var / static_cast<double>(count - 1));
}

double negative_log_likelihood(std::span<const float> logits, TokenId token) {
  double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  return max_logit + std::log(sum) - static_cast<double>(logits[static_cast<std::size_t>(token)]);
}

namespace {

// The windows of a token stream and the positions of each that are scored.
struct WindowPlan {
  std::int64_t windows = 0;
  std::int64_t step = 0;
  std::int64_t first = 0;  // scored positions of a window: [first, ctx - 1)
};

WindowPlan plan_windows(const ModelConfig& config, std::int64_t n, const PerplexityOptions& o) {
  if (o.ctx < 2 || o.ctx > config.context_length)
    fail("--ctx {} is out of range: it must be 2 to the model's context of {}", o.ctx, config.context_length);
  if (o.stride < 0 || o.stride >= o.ctx) fail("--stride {} must be 0 (chunks) or below --ctx {}", o.stride, o.ctx);
  WindowPlan p;
  if (o.stride == 0) {
    if (n < 2 * o.ctx)
      fail("the text has {} tokens; perplexity with --ctx {} needs at least {} (two chunks), as llama-perplexity does",
           n, o.ctx, 2 * o.ctx);
    p.windows = n / o.ctx;
    p.step = o.ctx;
    p.first = o.ctx / 2;
  } else {
    if (n < o.ctx) fail("the text has {} tokens; a window of --ctx {} needs at least that many", n, o.ctx);
    p.windows = (n - o.ctx + o.stride - 1) / o.stride;
    p.step = o.stride;
    p.first = o.ctx - o.stride - 1;
  }
  if (o.max_chunks > 0) p.windows = std::min(p.windows, o.max_chunks);
  if (p.windows < 1) fail("the text is too short for one window of --ctx {} with --stride {}", o.ctx, o.stride);
  return p;
}

// Runs one model over the windows of a plan, each from an empty cache.
class WindowScorer {
 public:
  WindowScorer(ModelSession& session, const PerplexityOptions& o, const WindowPlan& plan)
      : session_(session), o_(o), plan_(plan), kv_(*session.backend, session.config(), kv_options(o)),
        batch_(std::min(o.batch, o.ctx)),
        runner_(*session.backend, *session.loaded.model, kv_, runner_options(batch_, o.ctx)),
        table_(static_cast<int>(kv_.block_size())),
        window_(static_cast<std::size_t>(o.ctx)) {
    for (std::int64_t b = 0; b < kv_.num_blocks(); ++b) table_.append(static_cast<BlockId>(b));
  }

  // Calls fn(pos, logits of pos) for every scored position of window w, in order.
  template <typename F>
  void run(std::span<const TokenId> tokens, std::int64_t w, F&& fn) {
    const Vocab& vocab = session_.tokenizer->vocab();
    const std::int64_t start = w * plan_.step;
    std::copy(tokens.begin() + start, tokens.begin() + start + o_.ctx, window_.begin());
    if (vocab.add_bos && vocab.bos_id >= 0) window_[0] = vocab.bos_id;
    const auto V = static_cast<std::size_t>(session_.config().vocab_size);
    // Positions restart at 0 and overwrite the blocks.
    for (std::int64_t done = 0; done < o_.ctx; done += batch_) {
      const std::int64_t len = std::min(batch_, o_.ctx - done);
      // Logits for the chunk's positions in [first, ctx - 1): a suffix of the chunk, or none.
      const std::int64_t want_from = std::max(plan_.first, done);
      const std::int64_t want_to = std::min(o_.ctx - 1, done + len);
      SequenceChunk chunk;
      chunk.tokens = std::span<const TokenId>(window_).subspan(static_cast<std::size_t>(done), static_cast<std::size_t>(len));
      chunk.num_computed_tokens = done;
      chunk.block_table = &table_;
      // Rows are the chunk's last num_logits tokens; the final position has no next token to score.
      chunk.num_logits = want_to > want_from ? done + len - want_from : 0;
      runner_.execute(std::span<const SequenceChunk>(&chunk, 1));
      if (chunk.num_logits == 0) continue;
      runner_.logits_to_host(logits_);
      const float* rows = logits_.data();
      for (std::int64_t pos = want_from; pos < want_to; ++pos)
        fn(pos, std::span<const float>(rows + static_cast<std::size_t>(pos - want_from) * V, V));
    }
  }

 private:
  static RunnerOptions runner_options(std::int64_t batch, std::int64_t ctx) {
    RunnerOptions r;
    r.max_num_batched_tokens = batch;
    r.max_num_seqs = 1;
    r.max_logits = batch;
    r.max_model_len = ctx;
    return r;
  }

  static KvStorageOptions kv_options(const PerplexityOptions& o) {
    KvStorageOptions kv;
    kv.dtype = o.kv_dtype;
    kv.num_blocks = (o.ctx + kv.block_size - 1) / kv.block_size;
    return kv;
  }

  ModelSession& session_;
  const PerplexityOptions& o_;
  const WindowPlan& plan_;
  KvStorage kv_;
  std::int64_t batch_;
  ModelRunner runner_;
  BlockTable table_;
  std::vector<TokenId> window_;
  std::vector<float> logits_;  // [rows, vocab] the scored rows of a chunk, on the host
};

void add_nll(PerplexityResult& r, double nll) {
  r.nll_sum += nll;
  r.nll_sq_sum += nll * nll;
  ++r.count;
}

// log softmax(logits) in double precision.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  out.resize(logits.size());
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_z = max_logit + std::log(sum);
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_z;
}

}  // namespace

PerplexityResult compute_perplexity(ModelSession& session, std::span<const TokenId> tokens,
                                    const PerplexityOptions& o, const PerplexityProgress& progress) {
  const WindowPlan plan = plan_windows(session.config(), static_cast<std::int64_t>(tokens.size()), o);
  WindowScorer scorer(session, o, plan);
  PerplexityResult result;
  for (std::int64_t w = 0; w < plan.windows; ++w) {
    const std::int64_t start = w * plan.step;
    scorer.run(tokens, w, [&](std::int64_t pos, std::span<const float> logits) {
      add_nll(result, negative_log_likelihood(logits, tokens[start + pos + 1]));
    });
    ++result.num_chunks;
    result.running.push_back(result.perplexity());
    if (progress) progress(w + 1, plan.windows, result.perplexity());
  }
  return result;
}

double KlDivergenceResult::mean() const { return count > 0 ? kld_sum / static_cast<double>(count) : 0.0; }

double KlDivergenceResult::mean_error() const {
  if (count < 2) return 0.0;
  const double m = mean();
  const double var = std::max(0.0, kld_sq_sum / static_cast<double>(count) - m * m);
  return std::sqrt(var / static_cast<double>(count - 1));
}

double KlDivergenceResult::quantile(double q) const {
  if (values.empty()) return 0.0;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const auto i = static_cast<std::size_t>(std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[i];
}

double KlDivergenceResult::same_top_fraction() const {
  return count > 0 ? static_cast<double>(same_top) / static_cast<double>(count) : 0.0;
}

KlDivergenceResult compute_kl_divergence(ModelSession& base, ModelSession& model, std::span<const TokenId> tokens,
                                         const PerplexityOptions& o, const PerplexityProgress& progress) {
  if (base.config().vocab_size != model.config().vocab_size)
    fail("the base model has a vocabulary of {} tokens and the model {}; KL divergence needs the same vocabulary",
         base.config().vocab_size, model.config().vocab_size);
  const auto V = static_cast<std::size_t>(model.config().vocab_size);
  const WindowPlan plan = plan_windows(model.config(), static_cast<std::int64_t>(tokens.size()), o);
  PerplexityOptions base_options = o;
  base_options.kv_dtype = o.base_kv_dtype;
  WindowScorer base_scorer(base, base_options, plan);
  WindowScorer model_scorer(model, o, plan);
  KlDivergenceResult r;
  std::vector<float> base_logits;  // the scored rows of the base model in one window
  std::vector<double> log_p, log_q;
  for (std::int64_t w = 0; w < plan.windows; ++w) {
    const std::int64_t start = w * plan.step;
    base_logits.resize((static_cast<std::size_t>(o.ctx - 1 - plan.first)) * V);
    base_scorer.run(tokens, w, [&](std::int64_t pos, std::span<const float> logits) {
      std::copy(logits.begin(), logits.end(), base_logits.begin() + static_cast<std::ptrdiff_t>((pos - plan.first) * static_cast<std::int64_t>(V)));
    });
    model_scorer.run(tokens, w, [&](std::int64_t pos, std::span<const float> logits) {
      const TokenId next = tokens[start + pos + 1];
      std::span<const float> reference(base_logits.data() + static_cast<std::size_t>(pos - plan.first) * V, V);
      log_softmax(reference, log_p);
      log_softmax(logits, log_q);
      double kld = 0;
      std::size_t top_p = 0, top_q = 0;
      for (std::size_t i = 0; i < V; ++i) {
        kld += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
        if (log_p[i] > log_p[top_p]) top_p = i;
        if (log_q[i] > log_q[top_q]) top_q = i;
      }
      kld = std::max(0.0, kld);
      add_nll(r.base, -log_p[static_cast<std::size_t>(next)]);
      add_nll(r.model, -log_q[static_cast<std::size_t>(next)]);
      r.kld_sum += kld;
      r.kld_sq_sum += kld * kld;
      r.values.push_back(kld);
      r.same_top += top_p == top_q ? 1 : 0;
      ++r.count;
    });
    ++r.base.num_chunks;
    ++r.model.num_chunks;
    r.base.running.push_back(r.base.perplexity());
    r.model.running.push_back(r.model.perplexity());
    if (progress) progress(w + 1, plan.windows, r.mean());
  }
  return r;
}

}  // namespace folio
