// SamplingBatch: what the sampling op (Backend::sample) reads and writes, as
// plain fixed-layout records a device can read as they are: one
// SamplingRowParams per row to sample, the LogitAdjustments (logit bias and
// penalties) of the rows that have any, and per row one SampleResult back
// (8 bytes) plus a LogprobResult for the rows that ask for logprobs, and
// the token masks of constrained rows (structured outputs). Only those
// results cross from the device to the host in a step.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/ids.h"
#include "tensor/tensor.h"

namespace folio {

// Most top logprobs a row may ask for (vLLM's default max_logprobs, and
// OpenAI's limit for top_logprobs).
inline constexpr int kMaxLogprobs = 20;
// Temperatures below this are greedy, as in vLLM: dividing by them would
// overflow, and the distribution is one-hot to float precision anyway.
inline constexpr float kGreedyTemperature = 1e-5f;

// How one row of logits becomes a token. With draft_token >= 0 the row
// verifies a speculative proposal: greedy accepts it when it is the argmax;
// sampling draws u and accepts it when u < p(draft), else draws the token
// from p with the draft removed (so the output keeps the target's
// distribution). Every row of a sequence's step gets its own record: a
// verification chain of n proposals is n + 1 rows, row i with the counts of
// proposals 0 .. i - 1 added to its penalties and its RNG state moved i
// draws on, so that the rows are independent and the host walks the chain.
struct SamplingRowParams {
  std::int32_t logits_row = 0;     // the row of the step's logits it reads
  float temperature = 1.0f;        // < kGreedyTemperature: greedy argmax (no draw)
  std::int32_t top_k = 0;          // <= 0 or >= vocabulary: off
  float top_p = 1.0f;              // 1: off
  float min_p = 0.0f;              // 0: off
  float repetition_penalty = 1.0f; // vLLM's, over prompt and output tokens; 1: off
  float presence_penalty = 0.0f;   // OpenAI's, over output tokens
  float frequency_penalty = 0.0f;
  std::uint64_t rng_state = 0;     // SamplingRng state before this row's first draw
  std::int32_t draft_token = -1;   // the proposal this row verifies; -1: none
  std::int32_t num_logprobs = -1;  // -1: none; else the top this many (0 .. kMaxLogprobs)
  std::int32_t logprob_slot = -1;  // where its LogprobResult goes (rows that ask count 0, 1, ...)
  std::int32_t adjust_begin = 0;   // its LogitAdjustments: [adjust_begin, adjust_end)
  std::int32_t adjust_end = 0;
  // The row's token mask in SamplingBatch::masks; -1: none. A token whose bit
  // is clear gets logit -inf before anything else, so it is never chosen and
  // its logprob is -inf (vLLM applies the grammar bitmask to the logits before
  // its sampler, so its logprobs, too, are those of the masked distribution).
  std::int32_t mask_row = -1;

  bool is_greedy() const { return temperature < kGreedyTemperature; }
};

// One token of a row that logit bias or a penalty touches; at most one entry
// per token and row. Applied to that token's logit in the host Sampler's
// order: the bias, then the repetition penalty (when the token is in the
// prompt or the output), then frequency x output_count and presence (when
// output_count > 0).
struct LogitAdjustment {
  std::int32_t token = 0;
  std::int32_t has_bias = 0;       // 1: add bias
  float bias = 0.0f;
  std::int32_t output_count = 0;   // times the token is in the output so far
  std::int32_t in_prompt = 0;      // 1: the token is in the prompt
  std::int32_t reserved = 0;
};

struct SampleResult {
  std::int32_t token = -1;   // the sampled token; on a draft row, the proposal or its replacement
  std::int32_t accepted = 0; // draft rows: 1 when the proposal stands
};

struct TokenLogprob {
  TokenId token = -1;
  float logprob = 0.0f;
  bool operator==(const TokenLogprob&) const = default;
};

// From the model's unprocessed distribution (log_softmax of the raw logits,
// as vLLM returns by default): the row's token and its num_logprobs most
// likely tokens, most likely first, ties to the lower id.
struct LogprobResult {
  float logprob = 0.0f;       // of SampleResult::token
  std::int32_t num_top = 0;
  TokenLogprob top[kMaxLogprobs] = {};
};

static_assert(std::is_trivially_copyable_v<SamplingRowParams> && sizeof(SamplingRowParams) == 64);
static_assert(std::is_trivially_copyable_v<LogitAdjustment> && sizeof(LogitAdjustment) == 24);
static_assert(std::is_trivially_copyable_v<SampleResult> && sizeof(SampleResult) == 8);
static_assert(std::is_trivially_copyable_v<LogprobResult> && sizeof(LogprobResult) == 168);

// The records on the device, each an array of bytes of its record's size:
// rows [num_rows, sizeof(SamplingRowParams)], adjustments
// [num_adjustments, sizeof(LogitAdjustment)] (may be empty), results
// [num_rows, sizeof(SampleResult)], logprobs [num_logprob_rows,
// sizeof(LogprobResult)] (may be empty), masks [num_masks, mask_words]
// uint32 words (empty when no row is constrained): bit t % 32 of word t / 32
// set when token t is allowed; mask_words >= ceil(vocab / 32).
struct SamplingBatch {
  std::int64_t num_rows = 0;
  std::int64_t num_logprob_rows = 0;
  std::int64_t num_masks = 0;
  std::int64_t mask_words = 0;
  Tensor rows;
  Tensor adjustments;
  Tensor results;
  Tensor logprobs;
  Tensor masks;
};

// Whether token t is allowed by a mask row.
inline bool mask_allows(const std::uint32_t* mask, std::int64_t token) {
  return ((mask[token >> 5] >> (token & 31)) & 1u) != 0;
}

}  // namespace folio
