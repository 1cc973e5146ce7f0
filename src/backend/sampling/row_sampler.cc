#include "backend/sampling/row_sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "backend/sampling/sampler_math.h"
#include "core/error.h"

namespace folio {

namespace {

namespace sm = sampler_math;

void check_row(std::span<const float> logits) {
  if (logits.empty()) fail("cannot sample from an empty row of logits: the model has no tokens");
}
using Candidate = RowSampler::Candidate;
using Kept = RowSampler::Kept;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Up to this k, top-k scans the row once with a k-entry heap.
constexpr std::size_t kHeapSelectMaxK = 512;
// Otherwise top-k and top-p probe how deep below the top logit they reach,
// at these depths in units of temperature (weights e^-4, e^-8, ...), and
// gather only the tokens above the first depth that holds enough of them.
constexpr float kProbeDepths[] = {4.0f, 8.0f, 16.0f, 32.0f, 64.0f};
// Top-p sorts at most this many gathered tokens; a wider nucleus is found by
// partitioning them instead.
constexpr std::int64_t kMaxSortedNucleus = 4096;
// Up to this many kept tokens, the distribution is a short list in id order;
// beyond it, a dense row.
constexpr std::size_t kMaxSparse = 4096;

// NaN ranks as -inf, so that comparisons stay a strict weak order.
float rank_value(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// Most likely first; ties to the lower id. A total order over distinct ids.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Writes the k best of values to out[0, k), best first, with one scan and a
// heap whose top is the worst entry so far. Returns k (clamped to the row).
std::size_t heap_select(std::span<const float> values, std::size_t k, Candidate* out) {
  k = std::min(k, values.size());
  if (k == 0) return 0;
  std::size_t size = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = rank_value(values[i]);
    if (size < k) {
      out[size++] = {v, static_cast<TokenId>(i), 0.0f};
      std::push_heap(out, out + size, ranks_before);
    } else if (v > out[0].logit) {
      // Scanning ids upward, an equal value has a higher id and ranks after the worst.
      std::pop_heap(out, out + k, ranks_before);
      out[k - 1] = {v, static_cast<TokenId>(i), 0.0f};
      std::push_heap(out, out + k, ranks_before);
    }
  }
  std::sort_heap(out, out + k, ranks_before);
  return k;
}

// The top logit must be finite, or there is nothing to sample from.
void check_top_logit(float max_logit) {
  if (!std::isfinite(max_logit)) {
    fail("cannot sample: the top logit of the row is {} after logit_bias and penalties; the model "
         "produced invalid logits, or logit_bias or the output constraint bans every token",
         max_logit);
  }
}

TokenId first_argmax(std::span<const float> logits) {
  const float best = sm::max_logit(logits);  // vectorised; then the first index holding it
  if (best == kNegInf) {
    fail("cannot sample: every logit of the row is -inf or NaN after logit_bias and penalties; "
         "the model produced invalid logits, or logit_bias or the output constraint bans every token");
  }
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == best) return static_cast<TokenId>(i);
  }
  return -1;  // unreachable: best is one of the logits
}

double mass_of(const Candidate* first, const Candidate* last) {
  double mass = 0.0;
  for (const Candidate* c = first; c != last; ++c) mass += c->weight;
  return mass;
}

struct TopPCount {
  std::size_t count;  // tokens kept
  bool reached;       // whether their mass reached the target (else: keep looking deeper)
};

// Top-p over candidates [0, n) sorted best first, after better ones of mass
// `mass`: keeps each while the mass before it is below target.
TopPCount top_p_count_sorted(const Candidate* c, std::size_t n, double target, double mass = 0.0) {
  for (std::size_t j = 0; j < n; ++j) {
    if (!(mass < target)) return {j, true};
    mass += c[j].weight;
  }
  return {n, !(mass < target)};
}

// Top-p over unsorted candidates [0, n), the same count as sorting them all
// first but in expected O(n): partition off blocks of the best (64, 512, ...)
// until one reaches the target, bisect inside that block with nth_element,
// and sort only the last few. On return c[count - 1] is the last kept token.
// (Partial masses are summed in partition order, which the standard library
// decides; only a mass within rounding of the target could tell.)
TopPCount top_p_count_unsorted(Candidate* c, std::size_t n, double target) {
  constexpr std::size_t kSortBelow = 64;
  std::size_t lo = 0;  // [0, lo) hold the lo best, their mass below target
  double mass_lo = 0.0;
  std::size_t hi = n;  // the count lies in (lo, hi]
  auto split = [&](std::size_t mid) {  // moves the next mid - lo best to [lo, mid)
    std::nth_element(c + lo, c + mid, c + hi, ranks_before);
    const double mass = mass_lo + mass_of(c + lo, c + mid);
    if (mass < target) {
      lo = mid;
      mass_lo = mass;
      return false;
    }
    hi = mid;
    return true;
  };
  for (std::size_t block = kSortBelow; lo + block < hi; block *= 8) {
    if (split(lo + block)) break;
  }
  while (hi - lo > kSortBelow) split(lo + (hi - lo) / 2);
  std::sort(c + lo, c + hi, ranks_before);
  const TopPCount last = top_p_count_sorted(c + lo, hi - lo, target, mass_lo);
  return {lo + last.count, last.reached};
}

// out = the tokens whose logit is >= threshold, with their weights; every
// token (NaN too) when threshold is -inf.
void gather(std::span<const float> logits, std::span<const float> weights, float threshold,
            std::vector<Candidate>& out) {
  out.clear();
  const bool all = threshold == kNegInf;
  const std::int32_t threshold_key = sm::logit_key(threshold);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (all || sm::logit_key(logits[i]) >= threshold_key) {
      out.push_back({rank_value(logits[i]), static_cast<TokenId>(i), weights[i]});
    }
  }
}

void check_token(TokenId token, std::size_t vocab_size, const char* what) {
  if (token < 0 || static_cast<std::size_t>(token) >= vocab_size) {
    fail("{} names token {}, outside this row of {} logits; the request's tokens must come from "
         "the model's own vocabulary",
         what, token, vocab_size);
  }
}

// One uniform u, then the first entry (in id order) whose running sum of
// positive weights passes u x their lane sum. sample() walks its short list
// and sample_from() a dense row with it: both choose alike for the same weights.
template <typename IdAt, typename WeightAt>
TokenId walk(std::size_t n, double total, IdAt id_at, WeightAt weight_at, SamplingRng& rng) {
  if (!(total > 0.0)) {
    fail("cannot sample: no token has a positive probability; the distribution is all zero or NaN");
  }
  const double target = rng.uniform() * total;
  double cum = 0.0;
  TokenId last = -1;
  for (std::size_t j = 0; j < n; ++j) {
    const float w = weight_at(j);
    if (!sm::is_positive_finite(w)) continue;
    cum += w;
    last = id_at(j);
    if (cum > target) return last;
  }
  return last;  // rounding left the target at the very top: the last positive entry
}

}  // namespace


std::span<const float> RowSampler::adjusted(std::span<const float> logits, const SamplingRowParams& params,
                                            std::span<const LogitAdjustment> adjustments) {
  if (adjustments.empty()) return logits;
  const bool repetition = params.repetition_penalty != 1.0f;
  const bool openai_penalties = params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f;
  work_.assign(logits.begin(), logits.end());
  // Per token the host Sampler's order: bias, repetition, then the OpenAI
  // penalties; tokens are independent of each other.
  for (const LogitAdjustment& a : adjustments) {
    check_token(a.token, work_.size(), "a logit adjustment");
    float& l = work_[static_cast<std::size_t>(a.token)];
    if (a.has_bias != 0) l += a.bias;
    if (repetition && (a.output_count > 0 || a.in_prompt != 0))
      l = l > 0.0f ? l / params.repetition_penalty : l * params.repetition_penalty;
    if (openai_penalties && a.output_count > 0) {
      l -= params.frequency_penalty * static_cast<float>(a.output_count);
      l -= params.presence_penalty;
    }
  }
  return work_;
}

TokenId RowSampler::choose(std::span<const float> processed, const SamplingRowParams& params, SamplingRng& rng) {
  check_row(processed);
  if (params.is_greedy()) return first_argmax(processed);
  probs_.resize(processed.size());
  if (build_distribution(processed, params, probs_)) return sample_from(probs_, rng);
  sm::LaneSum sum;
  for (const Kept& e : kept_) sum.add(e.id, e.weight);
  return walk(
      kept_.size(), sum.total(), [&](std::size_t j) { return kept_[j].id; },
      [&](std::size_t j) { return kept_[j].weight; }, rng);
}

void RowSampler::processed_probs(std::span<const float> processed, const SamplingRowParams& params,
                                 std::span<float> probs) {
  check_row(processed);
  if (probs.size() != processed.size()) {
    fail("processed_probs: the output row holds {} numbers but the logits row {}; size it to the "
         "vocabulary",
         probs.size(), processed.size());
  }
  if (params.is_greedy()) {
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[static_cast<std::size_t>(first_argmax(processed))] = 1.0f;
    return;
  }
  if (!build_distribution(processed, params, probs)) {
    std::fill(probs.begin(), probs.end(), 0.0f);
    for (const Kept& e : kept_) probs[static_cast<std::size_t>(e.id)] = e.weight;
  }
}

TokenId RowSampler::argmax(std::span<const float> logits) {
  check_row(logits);
  return first_argmax(logits);
}

std::span<const float> RowSampler::masked(std::span<const float> logits, std::span<const std::uint32_t> mask) {
  if (mask.empty()) return logits;
  if (mask.size() * 32 < logits.size()) {
    fail("a token mask of {} words covers {} tokens but the row has {} logits; size it to the vocabulary",
         mask.size(), mask.size() * 32, logits.size());
  }
  masked_.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    masked_[i] = mask_allows(mask.data(), static_cast<std::int64_t>(i)) ? logits[i] : kNegInf;
  return masked_;
}

void RowSampler::run(std::span<const float> raw_logits, const SamplingRowParams& params,
                     std::span<const LogitAdjustment> adjustments, std::span<const std::uint32_t> mask,
                     SampleResult& result, LogprobResult* logprobs) {
  check_row(raw_logits);
  const std::span<const float> logits = masked(raw_logits, mask);
  SamplingRng rng = SamplingRng::from_state(params.rng_state);
  const std::span<const float> processed = adjusted(logits, params, adjustments);
  const TokenId draft = params.draft_token;
  result.accepted = 0;
  if (draft < 0) {
    result.token = choose(processed, params, rng);
  } else if (params.is_greedy()) {
    // The verifier's greedy rule: the proposal stands when it is the argmax.
    check_token(draft, logits.size(), "a draft");
    result.token = first_argmax(processed);
    result.accepted = result.token == draft ? 1 : 0;
  } else {
    // Proposals are deterministic (q(d) = 1): accept d with probability
    // p(d), else draw from p with d removed, the normalised max(0, p - q).
    check_token(draft, logits.size(), "a draft");
    verify_.resize(logits.size());
    processed_probs(processed, params, verify_);
    if (rng.uniform() < static_cast<double>(verify_[static_cast<std::size_t>(draft)])) {
      result.token = draft;
      result.accepted = 1;
    } else {
      verify_[static_cast<std::size_t>(draft)] = 0.0f;
      result.token = sample_from(verify_, rng);
    }
  }
  if (logprobs != nullptr && params.num_logprobs >= 0) fill_logprobs(logits, result.token, params.num_logprobs, *logprobs);
}

bool RowSampler::build_distribution(std::span<const float> logits, const SamplingRowParams& params,
                                 std::span<float> dense) {
  const std::size_t vocab_size = logits.size();
  const float temperature = params.temperature;
  const bool top_k = params.top_k > 0 && static_cast<std::size_t>(params.top_k) < vocab_size;
  const bool top_p = params.top_p < 1.0f;

  if (top_k && static_cast<std::size_t>(params.top_k) <= kHeapSelectMaxK) {
    // Small k: the k best, sorted, from one scan; top-p keeps a prefix of them.
    const auto k = static_cast<std::size_t>(params.top_k);
    candidates_.resize(k);
    heap_select(logits, k, candidates_.data());
    const float max_logit = candidates_[0].logit;
    check_top_logit(max_logit);
    for (Candidate& c : candidates_) c.weight = sm::softmax_weight(c.logit, max_logit, temperature);
    std::size_t count = k;
    if (top_p) {
      const double total = mass_of(candidates_.data(), candidates_.data() + k);
      count = top_p_count_sorted(candidates_.data(), k, static_cast<double>(params.top_p) * total)
                  .count;
    }
    keep_candidates(count, params.min_p);
    return false;
  }

  const float max_logit = sm::max_logit(logits);
  check_top_logit(max_logit);
  if (!top_k && !top_p) {
    sm::softmax_weights(logits, max_logit, temperature, params.min_p, dense);
    sm::divide(dense, static_cast<float>(sm::lane_sum(dense)));
    return true;
  }
  sm::softmax_weights(logits, max_logit, temperature, 0.0f, dense);
  const std::size_t count = top_k ? select_top_k(logits, dense, max_logit, params)
                                  : select_top_p(logits, dense, max_logit, params);
  // candidates_[0, count) are what top-k and top-p keep; min-p filters last.
  if (count <= kMaxSparse) {
    keep_candidates(count, params.min_p);
    return false;
  }
  const Candidate last = candidates_[count - 1];
  for (std::size_t i = 0; i < vocab_size; ++i) {
    const bool kept = !ranks_before(last, {rank_value(logits[i]), static_cast<TokenId>(i), 0.0f});
    if (!kept || !(dense[i] >= params.min_p)) dense[i] = 0.0f;
  }
  sm::divide(dense, static_cast<float>(sm::lane_sum(dense)));
  return true;
}

std::size_t RowSampler::select_top_k(std::span<const float> logits, std::span<const float> weights,
                                  float max_logit, const SamplingRowParams& params) {
  const auto k = static_cast<std::size_t>(params.top_k);
  float threshold = kNegInf;
  for (float depth : kProbeDepths) {
    const float t = max_logit - depth * params.temperature;
    if (sm::at_or_above(logits, weights, t).count >= static_cast<std::int64_t>(k)) {
      threshold = t;
      break;
    }
  }
  gather(logits, weights, threshold, candidates_);
  std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   candidates_.end(), ranks_before);
  if (params.top_p >= 1.0f) return k;
  const double total = mass_of(candidates_.data(), candidates_.data() + k);
  return top_p_count_unsorted(candidates_.data(), k, static_cast<double>(params.top_p) * total)
      .count;
}

std::size_t RowSampler::select_top_p(std::span<const float> logits, std::span<const float> weights,
                                  float max_logit, const SamplingRowParams& params) {
  const double target = static_cast<double>(params.top_p) * sm::lane_sum(weights);
  for (float depth : kProbeDepths) {
    const float threshold = max_logit - depth * params.temperature;
    const sm::AtOrAbove probe = sm::at_or_above(logits, weights, threshold);
    if (probe.mass < target) continue;
    gather(logits, weights, threshold, candidates_);
    TopPCount r;
    if (probe.count <= kMaxSortedNucleus) {
      std::sort(candidates_.begin(), candidates_.end(), ranks_before);
      r = top_p_count_sorted(candidates_.data(), candidates_.size(), target);
    } else {
      r = top_p_count_unsorted(candidates_.data(), candidates_.size(), target);
    }
    if (r.reached) return r.count;
    // The probe's mass and the running sum round differently: go deeper.
  }
  gather(logits, weights, kNegInf, candidates_);
  return top_p_count_unsorted(candidates_.data(), candidates_.size(), target).count;
}

void RowSampler::keep_candidates(std::size_t count, float min_p) {
  kept_.clear();
  for (std::size_t j = 0; j < count; ++j) {
    const Candidate& c = candidates_[j];
    if (c.weight > 0.0f && c.weight >= min_p) kept_.push_back({c.id, c.weight});
  }
  normalise_kept();
}

void RowSampler::normalise_kept() {
  std::sort(kept_.begin(), kept_.end(), [](const Kept& a, const Kept& b) { return a.id < b.id; });
  sm::LaneSum sum;
  for (const Kept& e : kept_) sum.add(e.id, e.weight);
  const auto divisor = static_cast<float>(sum.total());
  for (Kept& e : kept_) e.weight /= divisor;
}

TokenId RowSampler::sample_from(std::span<const float> probs, SamplingRng& rng) {
  return walk(
      probs.size(), sm::lane_sum(probs), [](std::size_t i) { return static_cast<TokenId>(i); },
      [&](std::size_t i) { return probs[i]; }, rng);
}

void RowSampler::fill_logprobs(std::span<const float> logits, TokenId token, int num_top, LogprobResult& out) {
  check_token(token, logits.size(), "the logprobs request");
  const float max_logit = sm::max_logit(logits);
  if (!std::isfinite(max_logit)) {
    fail("cannot compute logprobs: the top logit of the row is {}; the model produced invalid "
         "logits",
         max_logit);
  }
  // log_softmax(l)_i = (l_i - max) - log(sum_j exp(l_j - max)), the sum as exp_sum.
  const double log_sum = std::log(sm::exp_sum(logits, max_logit));
  auto logprob = [&](float logit) {
    return static_cast<float>(static_cast<double>(rank_value(logit) - max_logit) - log_sum);
  };
  out.logprob = logprob(logits[token]);

  std::array<Candidate, kMaxLogprobs> best;
  const auto k = static_cast<std::size_t>(std::clamp(num_top, 0, kMaxLogprobs));
  out.num_top = static_cast<std::int32_t>(heap_select(logits, k, best.data()));
  for (int j = 0; j < out.num_top; ++j) out.top[j] = {best[j].id, logprob(logits[best[j].id])};
}

}  // namespace folio
