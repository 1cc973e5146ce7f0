#include "engine/model_runner.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace folio {
namespace {

// Most padding tokens a step gets (the widest gap between two bucket sizes).
constexpr std::int64_t kMaxPaddingTokens = 64;
constexpr std::size_t kAlign = 64;

std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A [count, sizeof(T)] byte tensor of records at `offset` of a buffer.
template <typename T>
Tensor records(const Buffer& buffer, std::size_t offset, std::int64_t count) {
  return buffer.view(DType::I8, {count, static_cast<std::int64_t>(sizeof(T))}, offset);
}

}  // namespace

void SamplingRequest::clear() {
  rows.clear();
  adjustments.clear();
  num_logprob_rows = 0;
  masks.clear();
  mask_words = 0;
}

std::size_t SamplingRequest::add(SamplingRowParams row, std::span<const LogitAdjustment> adjust) {
  row.adjust_begin = static_cast<std::int32_t>(adjustments.size());
  adjustments.insert(adjustments.end(), adjust.begin(), adjust.end());
  row.adjust_end = static_cast<std::int32_t>(adjustments.size());
  row.logprob_slot = row.num_logprobs >= 0 ? static_cast<std::int32_t>(num_logprob_rows++) : -1;
  rows.push_back(row);
  return rows.size() - 1;
}

ModelRunner::ModelRunner(Backend& backend, Model& model, KvStorage& kv, const RunnerOptions& o, StateStorage* state)
    : backend_(backend),
      model_(model),
      kv_(kv),
      state_(state),
      max_tokens_(o.max_num_batched_tokens),
      max_seqs_(o.max_num_seqs + (o.pad_to_buckets ? kMaxPaddingTokens : 0)),
      max_logits_(o.max_logits),
      max_rows_(o.max_sampling_rows > 0 ? o.max_sampling_rows : o.max_logits),
      max_blocks_per_seq_((model.config().context_length + kv.block_size() - 1) / kv.block_size()),
      pad_(o.pad_to_buckets),
      max_model_len_(o.max_model_len),
      workspace_(backend, model.config(), o.max_num_batched_tokens, o.max_logits) {
  FOLIO_CHECK(max_tokens_ > 0 && max_seqs_ > 0 && max_logits_ > 0 && max_rows_ > 0);
  if (!model.config().recurrent_layers.empty() && state_ == nullptr)
    fail("model {} keeps a recurrent state per sequence, and this runner was given no state cache",
         model.config().name);
  std::size_t at = 0;
  auto take = [&at](std::size_t bytes) {
    const std::size_t offset = at;
    at += aligned(bytes);
    return offset;
  };
  const auto ints = [](std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(std::int32_t); };
  layout_.token_ids = take(ints(max_tokens_));
  layout_.positions = take(ints(max_tokens_));
  layout_.slots = take(ints(max_tokens_));
  layout_.logit_rows = take(ints(max_logits_));
  layout_.query_start = take(ints(max_seqs_ + 1));
  layout_.seq_lens = take(ints(max_seqs_));
  layout_.state_slots = take(ints(max_seqs_));
  layout_.rows = take(static_cast<std::size_t>(max_rows_) * sizeof(SamplingRowParams));
  layout_.block_tables = take(ints(max_seqs_ * max_blocks_per_seq_));
  layout_.bytes = at;
  for (Staging& st : staging_) st.meta = backend_.allocate_host(layout_.bytes);
  device_meta_ = backend_.allocate(layout_.bytes);
  const std::size_t result_bytes = static_cast<std::size_t>(max_rows_) * (sizeof(SampleResult) + sizeof(LogprobResult));
  device_results_ = backend_.allocate(result_bytes);
  host_results_ = backend_.allocate_host(result_bytes);
}

std::int64_t ModelRunner::padded_num_tokens(std::int64_t n) const {
  if (!pad_ || n <= 0) return n;
  std::int64_t p = 1;
  if (n <= 8) {
    while (p < n) p *= 2;
  } else if (n <= 256) {
    p = (n + 7) / 8 * 8;
  } else {
    p = (n + 63) / 64 * 64;
  }
  return std::max(n, std::min(p, max_tokens_));
}

ModelRunner::Staging& ModelRunner::next_staging() {
  slot_ = (slot_ + 1) % staging_.size();
  Staging& st = staging_[slot_];
  backend_.wait_until(st.uploaded);
  return st;
}

StepSamples ModelRunner::execute(std::span<const SequenceChunk> chunks, const SamplingRequest& sampling) {
  Staging& st = next_staging();
  auto* base = static_cast<std::uint8_t*>(st.meta.data());
  auto* token_ids = reinterpret_cast<std::int32_t*>(base + layout_.token_ids);
  auto* positions = reinterpret_cast<std::int32_t*>(base + layout_.positions);
  auto* slots = reinterpret_cast<std::int32_t*>(base + layout_.slots);
  auto* logit_rows = reinterpret_cast<std::int32_t*>(base + layout_.logit_rows);
  auto* query_start = reinterpret_cast<std::int32_t*>(base + layout_.query_start);
  auto* seq_lens = reinterpret_cast<std::int32_t*>(base + layout_.seq_lens);
  auto* state_slots = reinterpret_cast<std::int32_t*>(base + layout_.state_slots);
  auto* block_tables = reinterpret_cast<std::int32_t*>(base + layout_.block_tables);
  const std::int64_t stride = max_blocks_per_seq_;

  std::int64_t T = 0, L = 0, max_seq_len = 0, max_query_len = 0;
  for (const SequenceChunk& c : chunks) {
    T += static_cast<std::int64_t>(c.tokens.size());
    L += c.num_logits;
  }
  const std::int64_t padded = padded_num_tokens(T);
  const auto S = static_cast<std::int64_t>(chunks.size());
  const std::int64_t padded_seqs = S + (padded - T);
  if (T > max_tokens_) fail("a step of {} tokens exceeds --max-num-batched-tokens {}", T, max_tokens_);
  if (padded_seqs > max_seqs_) fail("a step of {} sequences exceeds the runner's {}", S, max_seqs_);
  if (L > max_logits_) fail("a step asks for {} logit rows; the runner holds {}", L, max_logits_);

  std::int64_t t = 0, l = 0;
  query_start[0] = 0;
  for (std::int64_t s = 0; s < S; ++s) {
    const SequenceChunk& c = chunks[static_cast<std::size_t>(s)];
    const auto n = static_cast<std::int64_t>(c.tokens.size());
    const std::int64_t end = c.num_computed_tokens + n;
    FOLIO_CHECK(n > 0 && c.num_logits <= n && c.block_table != nullptr);
    const std::vector<BlockId>& blocks = c.block_table->blocks();
    FOLIO_CHECK(c.block_table->block_size() == kv_.block_size() && c.block_table->num_slots() >= end);
    if (static_cast<std::int64_t>(blocks.size()) > stride)
      fail("a sequence of {} blocks exceeds the model's context of {} blocks", blocks.size(), stride);
    slot_scratch_.clear();
    c.block_table->slot_mapping(c.num_computed_tokens, end, slot_scratch_);
    for (std::int64_t i = 0; i < n; ++i, ++t) {
      token_ids[t] = c.tokens[static_cast<std::size_t>(i)];
      positions[t] = static_cast<std::int32_t>(c.num_computed_tokens + i);
      slots[t] = static_cast<std::int32_t>(slot_scratch_[static_cast<std::size_t>(i)]);
    }
    for (std::int64_t i = n - c.num_logits; i < n; ++i) logit_rows[l++] = query_start[s] + static_cast<std::int32_t>(i);
    query_start[s + 1] = query_start[s] + static_cast<std::int32_t>(n);
    seq_lens[s] = static_cast<std::int32_t>(end);
    if (state_ != nullptr && (c.state_slot < 0 || c.state_slot >= state_->num_slots()))
      fail("a hybrid model's sequence needs a state slot of the {} (got {})", state_->num_slots(), c.state_slot);
    state_slots[s] = static_cast<std::int32_t>(c.state_slot);
    std::int32_t* row = block_tables + s * stride;
    std::copy(blocks.begin(), blocks.end(), row);
    std::fill(row + blocks.size(), row + stride, 0);
    max_seq_len = std::max(max_seq_len, end);
    max_query_len = std::max(max_query_len, n);
  }
  // Padding: one-token sequences at position 0 of block 0 that write no
  // slot; no logits are read from them.
  for (std::int64_t s = S; s < padded_seqs; ++s, ++t) {
    token_ids[t] = 0;
    positions[t] = 0;
    slots[t] = -1;
    query_start[s + 1] = query_start[s] + 1;
    seq_lens[s] = 1;
    state_slots[s] = -1;
    std::fill(block_tables + s * stride, block_tables + (s + 1) * stride, 0);
    max_seq_len = std::max<std::int64_t>(max_seq_len, 1);
    max_query_len = std::max<std::int64_t>(max_query_len, 1);
  }
  stage_sampling(st, sampling);
  // One copy carries the step: everything up to the last used block table row.
  const std::size_t used = layout_.block_tables + static_cast<std::size_t>(padded_seqs * stride) * sizeof(std::int32_t);
  backend_.copy_to_device(device_meta_.view(DType::I8, {static_cast<std::int64_t>(used)}), st.meta.data(), used);
  st.uploaded = backend_.queue_point();

  auto ints = [this](std::size_t offset, std::int64_t n) {
    return device_meta_.view(DType::I32, {n}, offset);
  };
  ForwardBatch batch;
  batch.token_ids = ints(layout_.token_ids, padded);
  batch.meta.num_tokens = padded;
  batch.meta.num_seqs = padded_seqs;
  batch.meta.max_blocks_per_seq = stride;
  batch.meta.max_seq_len = max_seq_len;
  batch.meta.max_query_len = max_query_len;
  batch.meta.positions = ints(layout_.positions, padded);
  batch.meta.slot_mapping = ints(layout_.slots, padded);
  batch.meta.query_start = ints(layout_.query_start, padded_seqs + 1);
  batch.meta.seq_lens = ints(layout_.seq_lens, padded_seqs);
  batch.meta.block_tables = ints(layout_.block_tables, padded_seqs * stride);
  batch.logits_rows = ints(layout_.logit_rows, L);
  batch.max_model_len = max_model_len_;
  if (state_ != nullptr) {
    batch.state_slots = ints(layout_.state_slots, padded_seqs);
    batch.recurrent_state = &state_->layers();
  }

  logits_ = workspace_.logits(L);
  model_.forward(batch, kv_.layers(), workspace_, logits_);
  if (sampling.rows.empty()) return {};
  return run_sampling(sampling);
}

StepSamples ModelRunner::sample(const SamplingRequest& sampling) {
  if (sampling.rows.empty()) return {};
  Staging& st = next_staging();
  stage_sampling(st, sampling);
  const std::size_t bytes = sampling.rows.size() * sizeof(SamplingRowParams);
  backend_.copy_to_device(device_meta_.view(DType::I8, {static_cast<std::int64_t>(bytes)}, layout_.rows),
                          static_cast<std::uint8_t*>(st.meta.data()) + layout_.rows, bytes);
  st.uploaded = backend_.queue_point();
  return run_sampling(sampling);
}

// The rows into the staging (execute's one copy carries them; sample()
// copies them apart) and the adjustments into their own buffers, copied now.
void ModelRunner::stage_sampling(Staging& st, const SamplingRequest& sampling) {
  const auto R = static_cast<std::int64_t>(sampling.rows.size());
  if (R > max_rows_) fail("a step samples {} rows; the runner holds {}", R, max_rows_);
  if (R > 0)
    std::memcpy(static_cast<std::uint8_t*>(st.meta.data()) + layout_.rows, sampling.rows.data(),
                static_cast<std::size_t>(R) * sizeof(SamplingRowParams));
  stage(sampling.adjustments.data(), sampling.adjustments.size() * sizeof(LogitAdjustment), st.adjustments,
        device_adjustments_);
  stage(sampling.masks.data(), sampling.masks.size() * sizeof(std::uint32_t), st.masks, device_masks_);
}

// Copies bytes to the device through pinned staging, growing either buffer
// to fit; nothing when there are none. The device buffer is only read by
// sampling, and a step that samples ends waiting for the device, so none of
// its readers is still queued when it grows.
void ModelRunner::stage(const void* data, std::size_t bytes, Buffer& staging, Buffer& device) {
  if (bytes == 0) return;
  if (bytes > staging.size()) staging = backend_.allocate_host(std::max(bytes, 2 * staging.size()));
  if (bytes > device.size()) device = backend_.allocate(std::max(bytes, 2 * device.size()));
  std::memcpy(staging.data(), data, bytes);
  backend_.copy_to_device(device.view(DType::I8, {static_cast<std::int64_t>(bytes)}), staging.data(), bytes);
}

// The results, and right after them the logprobs asked for, so that one
// copy brings back everything the step sampled.
StepSamples ModelRunner::run_sampling(const SamplingRequest& sampling) {
  const auto R = static_cast<std::int64_t>(sampling.rows.size());
  const std::int64_t M = sampling.num_logprob_rows;
  const auto A = static_cast<std::int64_t>(sampling.adjustments.size());
  const std::size_t logprobs_at = static_cast<std::size_t>(R) * sizeof(SampleResult);
  static_assert(sizeof(SampleResult) % alignof(LogprobResult) == 0);
  SamplingBatch b;
  b.num_rows = R;
  b.num_logprob_rows = M;
  b.rows = records<SamplingRowParams>(device_meta_, layout_.rows, R);
  b.adjustments = records<LogitAdjustment>(device_adjustments_, 0, A);
  b.results = records<SampleResult>(device_results_, 0, R);
  b.logprobs = records<LogprobResult>(device_results_, logprobs_at, M);
  b.num_masks = sampling.num_masks();
  b.mask_words = b.num_masks > 0 ? sampling.mask_words : 0;
  b.masks = device_masks_.view(DType::I32, {b.num_masks * b.mask_words});
  backend_.sample(logits_, b);

  auto* host = static_cast<std::uint8_t*>(host_results_.data());
  const std::size_t bytes = logprobs_at + static_cast<std::size_t>(M) * sizeof(LogprobResult);
  backend_.copy_to_host(host, device_results_.view(DType::I8, {static_cast<std::int64_t>(bytes)}), bytes);
  StepSamples out;
  out.results = {reinterpret_cast<const SampleResult*>(host), static_cast<std::size_t>(R)};
  out.logprobs = {reinterpret_cast<const LogprobResult*>(host + logprobs_at), static_cast<std::size_t>(M)};
  return out;
}

void ModelRunner::logits_to_host(std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(logits_.numel()));
  backend_.copy_to_host(out.data(), logits_, logits_.bytes());
}

}  // namespace folio
