#include "engine/model_runner.h"

#include <algorithm>

#include "core/error.h"

namespace folio {

ModelRunner::ModelRunner(Backend& backend, Model& model, KvStorage& kv, std::int64_t max_num_batched_tokens,
                         std::int64_t max_num_seqs, std::int64_t max_logits)
    : backend_(backend),
      model_(model),
      kv_(kv),
      max_tokens_(max_num_batched_tokens),
      max_seqs_(max_num_seqs),
      max_logits_(max_logits),
      max_blocks_per_seq_((model.config().context_length + kv.block_size() - 1) / kv.block_size()),
      workspace_(backend, model.config(), max_num_batched_tokens, max_logits) {
  FOLIO_CHECK(max_tokens_ > 0 && max_seqs_ > 0 && max_logits_ > 0);
  const std::int64_t ints = 4 * max_tokens_ + 2 * (max_seqs_ + 1) + max_seqs_ * max_blocks_per_seq_ + max_logits_;
  device_meta_ = backend_.allocate(static_cast<std::size_t>(ints) * sizeof(std::int32_t));
  std::size_t off = 0;
  auto take = [&](std::int64_t n) {
    Tensor t = device_meta_.view(DType::I32, {n}, off);
    off += static_cast<std::size_t>(n) * sizeof(std::int32_t);
    return t;
  };
  d_token_ids_ = take(max_tokens_);
  d_positions_ = take(max_tokens_);
  d_slots_ = take(max_tokens_);
  d_query_start_ = take(max_seqs_ + 1);
  d_seq_lens_ = take(max_seqs_ + 1);
  d_block_tables_ = take(max_seqs_ * max_blocks_per_seq_);
  d_logit_rows_ = take(max_logits_);
}

Tensor ModelRunner::execute(std::span<const SequenceChunk> chunks) {
  const std::int64_t bs = kv_.block_size();
  token_ids_.clear();
  positions_.clear();
  slots_.clear();
  query_start_.assign(1, 0);
  seq_lens_.clear();
  logit_rows_.clear();
  // The widest block table of the step sets the row stride of the tables.
  std::int64_t width = 1;
  for (const auto& c : chunks) width = std::max<std::int64_t>(width, static_cast<std::int64_t>(c.block_table.size()));
  FOLIO_CHECK(width <= max_blocks_per_seq_);
  block_tables_.assign(static_cast<std::size_t>(width * static_cast<std::int64_t>(chunks.size())), 0);

  if (static_cast<std::int64_t>(chunks.size()) > max_seqs_)
    fail("a step of {} sequences exceeds the runner's {}", chunks.size(), max_seqs_);
  for (std::size_t s = 0; s < chunks.size(); ++s) {
    const SequenceChunk& c = chunks[s];
    const auto n = static_cast<std::int64_t>(c.tokens.size());
    const std::int64_t end = c.num_computed_tokens + n;
    FOLIO_CHECK(n > 0 && c.num_logits <= n);
    FOLIO_CHECK(static_cast<std::int64_t>(c.block_table.size()) * bs >= end);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t pos = c.num_computed_tokens + i;
      token_ids_.push_back(c.tokens[i]);
      positions_.push_back(static_cast<std::int32_t>(pos));
      slots_.push_back(static_cast<std::int32_t>(c.block_table[pos / bs] * bs + pos % bs));
    }
    for (std::int64_t i = n - c.num_logits; i < n; ++i)
      logit_rows_.push_back(query_start_.back() + static_cast<std::int32_t>(i));
    query_start_.push_back(query_start_.back() + static_cast<std::int32_t>(n));
    seq_lens_.push_back(static_cast<std::int32_t>(end));
    std::copy(c.block_table.begin(), c.block_table.end(), block_tables_.begin() + static_cast<std::int64_t>(s) * width);
  }
  const auto T = static_cast<std::int64_t>(token_ids_.size());
  const auto S = static_cast<std::int64_t>(chunks.size());
  const auto L = static_cast<std::int64_t>(logit_rows_.size());
  if (T > max_tokens_) fail("a step of {} tokens exceeds --max-num-batched-tokens {}", T, max_tokens_);
  if (L > max_logits_) fail("a step asks for {} logit rows; the runner holds {}", L, max_logits_);

  auto upload = [&](Tensor& dst, const std::vector<std::int32_t>& src, std::int64_t n) {
    Tensor view = dst;
    view.shape[0] = n;
    backend_.copy_to_device(view, src.data(), static_cast<std::size_t>(n) * sizeof(std::int32_t));
    return view;
  };
  ForwardBatch batch;
  batch.token_ids = upload(d_token_ids_, token_ids_, T);
  batch.meta.num_tokens = T;
  batch.meta.num_seqs = S;
  batch.meta.max_blocks_per_seq = width;
  batch.meta.positions = upload(d_positions_, positions_, T);
  batch.meta.slot_mapping = upload(d_slots_, slots_, T);
  batch.meta.query_start = upload(d_query_start_, query_start_, S + 1);
  batch.meta.seq_lens = upload(d_seq_lens_, seq_lens_, S);
  batch.meta.block_tables = upload(d_block_tables_, block_tables_, S * width);
  batch.logits_rows = upload(d_logit_rows_, logit_rows_, L);

  Tensor logits = workspace_.logits(L);
  model_.forward(batch, kv_.layers(), workspace_, logits);
  return logits;
}

const float* ModelRunner::host_logits(const Tensor& logits) {
  if (logits.device == Device::kCpu) return logits.as<const float>();
  host_logits_.resize(static_cast<std::size_t>(logits.numel()));
  backend_.copy_to_host(host_logits_.data(), logits, logits.bytes());
  return host_logits_.data();
}

}  // namespace folio
