#include "engine/perplexity.h"

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

PerplexityResult compute_perplexity(ModelSession& session, std::span<const TokenId> tokens,
                                    const PerplexityOptions& o, const PerplexityProgress& progress) {
  const ModelConfig& config = session.config();
  const Vocab& vocab = session.tokenizer->vocab();
  const std::int64_t n = static_cast<std::int64_t>(tokens.size());
  if (o.ctx < 2 || o.ctx > config.context_length)
    fail("--ctx {} is out of range: it must be 2 to the model's context of {}", o.ctx, config.context_length);
  if (o.stride < 0 || o.stride >= o.ctx) fail("--stride {} must be 0 (chunks) or below --ctx {}", o.stride, o.ctx);

  // Windows and the positions of each that are scored: [first, ctx - 1).
  std::int64_t windows, step, first;
  if (o.stride == 0) {
    if (n < 2 * o.ctx)
      fail("the text has {} tokens; perplexity with --ctx {} needs at least {} (two chunks), as llama-perplexity does",
           n, o.ctx, 2 * o.ctx);
    windows = n / o.ctx;
    step = o.ctx;
    first = o.ctx / 2;
  } else {
    if (n < o.ctx) fail("the text has {} tokens; a window of --ctx {} needs at least that many", n, o.ctx);
    windows = (n - o.ctx + o.stride - 1) / o.stride;
    step = o.stride;
    first = o.ctx - o.stride - 1;
  }
  if (o.max_chunks > 0) windows = std::min(windows, o.max_chunks);
  if (windows < 1) fail("the text is too short for one window of --ctx {} with --stride {}", o.ctx, o.stride);

  KvStorageOptions kv_options;
  kv_options.dtype = o.kv_dtype;
  kv_options.num_blocks = (o.ctx + kv_options.block_size - 1) / kv_options.block_size;
  KvStorage kv(*session.backend, config, kv_options);
  std::vector<std::int32_t> table(static_cast<std::size_t>(kv.num_blocks()));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::int32_t>(i);
  const std::int64_t batch = std::min(o.batch, o.ctx);
  ModelRunner runner(*session.backend, *session.loaded.model, kv, batch, 1, batch);

  PerplexityResult result;
  const bool add_bos = vocab.add_bos && vocab.bos_id >= 0;
  std::vector<TokenId> window(static_cast<std::size_t>(o.ctx));
  const auto V = static_cast<std::size_t>(config.vocab_size);
  for (std::int64_t w = 0; w < windows; ++w) {
    const std::int64_t start = w * step;
    std::copy(tokens.begin() + start, tokens.begin() + start + o.ctx, window.begin());
    if (add_bos) window[0] = vocab.bos_id;
    // Each window from an empty cache: positions restart at 0 and overwrite the blocks.
    for (std::int64_t done = 0; done < o.ctx; done += batch) {
      const std::int64_t len = std::min(batch, o.ctx - done);
      // Logits for the chunk's positions in [first, ctx - 1): a suffix of the chunk, or none.
      const std::int64_t want_from = std::max(first, done);
      const std::int64_t want_to = std::min(o.ctx - 1, done + len);
      SequenceChunk chunk;
      chunk.tokens = std::span<const TokenId>(window).subspan(static_cast<std::size_t>(done), static_cast<std::size_t>(len));
      chunk.num_computed_tokens = done;
      chunk.block_table = table;
      // Rows are the chunk's last num_logits tokens; the final position has no next token to score.
      chunk.num_logits = want_to > want_from ? done + len - want_from : 0;
      Tensor logits = runner.execute(std::span<const SequenceChunk>(&chunk, 1));
      if (chunk.num_logits == 0) continue;
      const float* rows = runner.host_logits(logits);
      for (std::int64_t pos = want_from; pos < want_to; ++pos) {
        const float* row = rows + static_cast<std::size_t>(pos - want_from) * V;
        const double nll = negative_log_likelihood(std::span<const float>(row, V), tokens[start + pos + 1]);
        result.nll_sum += nll;
        result.nll_sq_sum += nll * nll;
        ++result.count;
      }
    }
    ++result.num_chunks;
    result.running.push_back(result.perplexity());
    if (progress) progress(w + 1, windows, result.perplexity());
  }
  return result;
}

}  // namespace folio
