// The sampling op of every backend against the reference (RowSampler, row by
// row): greedy and seeded rows under every filter, logit bias and penalties
// through adjustments, draft verification (greedy and sampled), logprobs,
// over vocabularies from 1 to Qwen's 151,936; the same tokens and logprobs
// bit for bit, and a row's result independent of the other rows.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "support/op_suite.h"

namespace folio::testing {
namespace {

class SamplingOps : public OpTest {};

// A random row record: a mix of what requests ask for.
SamplingRowParams random_row(std::mt19937& rng, std::int32_t logits_row, std::int64_t vocab,
                             std::vector<LogitAdjustment>& adjustments) {
  SamplingRowParams p;
  p.logits_row = logits_row;
  const int kind = static_cast<int>(rng() % 8);
  p.temperature = kind == 0 ? 0.0f : std::uniform_real_distribution<float>(0.2f, 1.6f)(rng);
  if (kind == 1) p.top_k = 1 + static_cast<int>(rng() % 40);
  if (kind == 2) p.top_k = 600 + static_cast<int>(rng() % 2000);  // beyond the heap's reach
  if (kind == 3 || kind == 2) p.top_p = std::uniform_real_distribution<float>(0.05f, 0.99f)(rng);
  if (kind == 4) p.min_p = std::uniform_real_distribution<float>(0.01f, 0.3f)(rng);
  if (kind == 5) {
    p.repetition_penalty = 1.3f;
    p.presence_penalty = 0.4f;
    p.frequency_penalty = 0.7f;
  }
  p.rng_state = (static_cast<std::uint64_t>(rng()) << 32) | rng();
  if (rng() % 3 == 0) p.draft_token = static_cast<std::int32_t>(rng() % vocab);
  if (rng() % 2 == 0) p.num_logprobs = static_cast<std::int32_t>(rng() % (kMaxLogprobs + 1));
  p.adjust_begin = static_cast<std::int32_t>(adjustments.size());
  const int touched = kind == 5 || kind == 6 ? static_cast<int>(rng() % 30) : 0;
  std::vector<bool> seen(static_cast<std::size_t>(vocab), false);
  for (int i = 0; i < touched; ++i) {
    const auto token = static_cast<std::int32_t>(rng() % vocab);
    if (seen[static_cast<std::size_t>(token)]) continue;
    seen[static_cast<std::size_t>(token)] = true;
    LogitAdjustment a;
    a.token = token;
    a.has_bias = rng() % 2 == 0;
    a.bias = a.has_bias ? std::uniform_real_distribution<float>(-100.0f, 5.0f)(rng) : 0.0f;
    a.output_count = static_cast<std::int32_t>(rng() % 4);
    a.in_prompt = rng() % 2 == 0;
    adjustments.push_back(a);
  }
  p.adjust_end = static_cast<std::int32_t>(adjustments.size());
  return p;
}

struct Sampled {
  std::vector<SampleResult> results;
  std::vector<LogprobResult> logprobs;
};

Sampled run(Backend& be, const std::vector<float>& logits, std::int64_t vocab, std::vector<SamplingRowParams> rows,
            const std::vector<LogitAdjustment>& adjustments) {
  std::int64_t slots = 0;
  for (SamplingRowParams& r : rows) r.logprob_slot = r.num_logprobs >= 0 ? static_cast<std::int32_t>(slots++) : -1;
  const auto R = static_cast<std::int64_t>(rows.size()), A = static_cast<std::int64_t>(adjustments.size());
  const auto L = static_cast<std::int64_t>(logits.size()) / vocab;
  DeviceTensor logits_d(be, DType::F32, {L, vocab});
  DeviceTensor rows_d(be, DType::I8, {R, static_cast<std::int64_t>(sizeof(SamplingRowParams))});
  DeviceTensor adj_d(be, DType::I8, {A, static_cast<std::int64_t>(sizeof(LogitAdjustment))});
  DeviceTensor res_d(be, DType::I8, {R, static_cast<std::int64_t>(sizeof(SampleResult))});
  DeviceTensor lp_d(be, DType::I8, {slots, static_cast<std::int64_t>(sizeof(LogprobResult))});
  logits_d.upload_values(logits);
  rows_d.upload_values(rows);
  adj_d.upload_values(adjustments);
  SamplingBatch b;
  b.num_rows = R;
  b.num_logprob_rows = slots;
  b.rows = *rows_d;
  b.adjustments = *adj_d;
  b.results = *res_d;
  b.logprobs = *lp_d;
  be.sample(*logits_d, b);
  res_d.expect_guards_intact("sample results");
  lp_d.expect_guards_intact("sample logprobs");
  return {res_d.download_values<SampleResult>(), lp_d.download_values<LogprobResult>()};
}

// The reference over host copies of the same records.
Sampled reference(const std::vector<float>& logits, std::int64_t vocab, std::vector<SamplingRowParams> rows,
                  std::vector<LogitAdjustment> adjustments) {
  ReferenceBackend ref;
  return run(ref, logits, vocab, std::move(rows), adjustments);
}

std::string differences(const Sampled& got, const Sampled& want, const std::vector<SamplingRowParams>& rows) {
  for (std::size_t r = 0; r < want.results.size(); ++r) {
    if (got.results[r].token != want.results[r].token || got.results[r].accepted != want.results[r].accepted)
      return fmt::format("row {} (temperature {}, top_k {}, top_p {}, min_p {}, draft {}): token {} accepted {}, "
                         "expected {} {}",
                         r, rows[r].temperature, rows[r].top_k, rows[r].top_p, rows[r].min_p, rows[r].draft_token,
                         got.results[r].token, got.results[r].accepted, want.results[r].token,
                         want.results[r].accepted);
  }
  for (std::size_t s = 0; s < want.logprobs.size(); ++s)
    if (std::memcmp(&got.logprobs[s], &want.logprobs[s], sizeof(LogprobResult)) != 0)
      return fmt::format("logprob slot {} differs", s);
  return {};
}

TEST_P(SamplingOps, EveryKindOfRowGivesTheReferencesBits) {
  std::mt19937 rng(21);
  for (std::int64_t vocab : {1, 7, 1000, 49152, 151936}) {
    const std::int64_t L = vocab > 100000 ? 3 : 9, R = vocab > 100000 ? 6 : 40;
    std::vector<float> logits = random_floats(static_cast<std::size_t>(L * vocab), rng, 3.0f);
    if (vocab >= 7) {
      logits[3] = std::numeric_limits<float>::quiet_NaN();              // never chosen
      logits[static_cast<std::size_t>(vocab + 1)] = logits[static_cast<std::size_t>(vocab)];  // a tie
    }
    std::vector<SamplingRowParams> rows;
    std::vector<LogitAdjustment> adjustments;
    for (std::int64_t r = 0; r < R; ++r)
      rows.push_back(random_row(rng, static_cast<std::int32_t>(r % L), vocab, adjustments));
    const Sampled want = reference(logits, vocab, rows, adjustments);
    const Sampled got = run(be(), logits, vocab, rows, adjustments);
    EXPECT_EQ(differences(got, want, rows), "") << "vocabulary " << vocab;
    // Rule 5: each row alone gives what it gave in the batch.
    for (std::int64_t r = 0; r < R; r += 7) {
      std::vector<SamplingRowParams> one = {rows[static_cast<std::size_t>(r)]};
      std::vector<LogitAdjustment> adj(adjustments.begin() + one[0].adjust_begin, adjustments.begin() + one[0].adjust_end);
      one[0].adjust_end -= one[0].adjust_begin;
      one[0].adjust_begin = 0;
      const Sampled alone = run(be(), logits, vocab, one, adj);
      EXPECT_EQ(alone.results[0].token, got.results[static_cast<std::size_t>(r)].token) << "row " << r << " alone";
    }
  }
}

TEST_P(SamplingOps, BadRecordsAreRefused) {
  const std::vector<float> logits(8, 0.0f);
  SamplingRowParams p;
  p.logits_row = 2;  // of 1
  EXPECT_THROW(run(be(), logits, 8, {p}, {}), Error);
  p.logits_row = 0;
  p.adjust_end = 3;  // of none
  EXPECT_THROW(run(be(), logits, 8, {p}, {}), Error);
  p.adjust_end = 0;
  LogitAdjustment a;
  a.token = 8;  // outside the vocabulary
  a.has_bias = 1;
  p.adjust_end = 1;
  EXPECT_THROW(run(be(), logits, 8, {p}, {a}), Error);
}

FOLIO_OP_SUITE(SamplingOps);

}  // namespace
}  // namespace folio::testing
