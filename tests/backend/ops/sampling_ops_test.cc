// The sampling op of every backend against the reference (RowSampler, row by
// row): greedy and seeded rows under every filter, logit bias and penalties
// through adjustments, draft verification (greedy and sampled), logprobs,
// over vocabularies from 1 to Qwen's 151,936; the same tokens and logprobs
// bit for bit, and a row's result independent of the other rows.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
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
            const std::vector<LogitAdjustment>& adjustments, const std::vector<std::uint32_t>& masks = {},
            std::int64_t mask_words = 0) {
  std::int64_t slots = 0;
  for (SamplingRowParams& r : rows) r.logprob_slot = r.num_logprobs >= 0 ? static_cast<std::int32_t>(slots++) : -1;
  const auto R = static_cast<std::int64_t>(rows.size()), A = static_cast<std::int64_t>(adjustments.size());
  const auto L = static_cast<std::int64_t>(logits.size()) / vocab;
  DeviceTensor logits_d(be, DType::F32, {L, vocab});
  DeviceTensor rows_d(be, DType::I8, {R, static_cast<std::int64_t>(sizeof(SamplingRowParams))});
  DeviceTensor adj_d(be, DType::I8, {A, static_cast<std::int64_t>(sizeof(LogitAdjustment))});
  DeviceTensor res_d(be, DType::I8, {R, static_cast<std::int64_t>(sizeof(SampleResult))});
  DeviceTensor lp_d(be, DType::I8, {slots, static_cast<std::int64_t>(sizeof(LogprobResult))});
  const std::int64_t M = mask_words > 0 ? static_cast<std::int64_t>(masks.size()) / mask_words : 0;
  DeviceTensor masks_d(be, DType::I32, {M * mask_words});
  logits_d.upload_values(logits);
  rows_d.upload_values(rows);
  adj_d.upload_values(adjustments);
  masks_d.upload_values(masks);
  SamplingBatch b;
  b.num_masks = M;
  b.mask_words = M > 0 ? mask_words : 0;
  b.masks = *masks_d;
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
                  std::vector<LogitAdjustment> adjustments, const std::vector<std::uint32_t>& masks = {},
                  std::int64_t mask_words = 0) {
  ReferenceBackend ref;
  return run(ref, logits, vocab, std::move(rows), adjustments, masks, mask_words);
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

// Token masks (structured outputs): rows with a mask of every density, down
// to one allowed token, give the reference's bits; no row ever returns a
// token its mask forbids, and their logprobs are those of the masked row.
TEST_P(SamplingOps, MaskedRowsGiveTheReferencesBitsAndNeverAForbiddenToken) {
  std::mt19937 rng(33);
  for (std::int64_t vocab : {1, 33, 1000, 49152}) {
    const std::int64_t L = 6, R = 36, words = (vocab + 31) / 32;
    std::vector<float> logits = random_floats(static_cast<std::size_t>(L * vocab), rng, 3.0f);
    std::vector<SamplingRowParams> rows;
    std::vector<LogitAdjustment> adjustments;
    std::vector<std::uint32_t> masks;
    for (std::int64_t r = 0; r < R; ++r) {
      rows.push_back(random_row(rng, static_cast<std::int32_t>(r % L), vocab, adjustments));
      if (r % 4 == 3) continue;  // unconstrained rows beside constrained ones
      rows.back().mask_row = static_cast<std::int32_t>(masks.size() / static_cast<std::size_t>(words));
      const std::size_t at = masks.size();
      masks.resize(at + static_cast<std::size_t>(words), 0u);
      const double density = r % 5 == 0 ? 0.0 : std::uniform_real_distribution<double>(0.001, 0.9)(rng);
      for (std::int64_t t = 0; t < vocab; ++t)
        if (std::uniform_real_distribution<double>(0.0, 1.0)(rng) < density) masks[at + t / 32] |= 1u << (t % 32);
      // At least one allowed token whose logit no adjustment bans.
      const auto keep = static_cast<std::int64_t>(rng() % vocab);
      masks[at + keep / 32] |= 1u << (keep % 32);
      for (std::int32_t a = rows.back().adjust_begin; a < rows.back().adjust_end; ++a)
        if (adjustments[a].token == keep) adjustments[a].bias = std::max(adjustments[a].bias, 0.0f);
      if (r % 7 == 0) masks[at + static_cast<std::size_t>(words) - 1] |= ~0u << (vocab % 32 == 0 ? 31 : vocab % 32);  // bits past the vocabulary
    }
    const Sampled want = reference(logits, vocab, rows, adjustments, masks, words);
    const Sampled got = run(be(), logits, vocab, rows, adjustments, masks, words);
    EXPECT_EQ(differences(got, want, rows), "") << "vocabulary " << vocab;
    // run() numbers the logprob slots in row order, over the rows that ask.
    std::size_t slot = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::size_t lp_slot = rows[r].num_logprobs >= 0 ? slot++ : 0;
      if (rows[r].mask_row < 0) continue;
      const std::uint32_t* mask = masks.data() + rows[r].mask_row * words;
      const TokenId t = got.results[r].token;
      ASSERT_TRUE(t >= 0 && t < vocab) << "row " << r;
      EXPECT_TRUE(mask_allows(mask, t)) << "row " << r << " drew forbidden token " << t;
      if (rows[r].num_logprobs < 0) continue;
      ASSERT_LT(lp_slot, got.logprobs.size()) << "row " << r;
      const LogprobResult& lp = got.logprobs[lp_slot];
      EXPECT_TRUE(std::isfinite(lp.logprob)) << "row " << r;
      for (int j = 0; j < lp.num_top; ++j) {
        if (std::isfinite(lp.top[j].logprob)) {
          EXPECT_TRUE(mask_allows(mask, lp.top[j].token)) << "row " << r;
        }
      }
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
  p.adjust_end = 0;
  p.mask_row = 1;  // of one mask
  EXPECT_THROW(run(be(), logits, 8, {p}, {}, {0xffu}, 1), Error);
  p.mask_row = 0;  // a mask that forbids every token
  EXPECT_THROW(run(be(), logits, 8, {p}, {}, {0u}, 1), Error);
}

FOLIO_OP_SUITE(SamplingOps);

}  // namespace
}  // namespace folio::testing
