#include "engine/speculative/speculation_controller.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace folio {
namespace {

// A sequence's own counts weigh against the pooled ones as if it had this
// many verifications behind it: a new sequence starts from the pool's rate.
constexpr double kPriorWeight = 4.0;
// Counts are halved past this many events, so rates follow recent text.
constexpr double kWindow = 256.0;
// A cost is a running mean of its first samples, then an average that
// forgets: the last kCostMemory samples count most.
constexpr int kCostMemory = 8;
// Exploration: a neighbouring choice is retried after this many steps of a
// bucket, twice as long after each retry that changed nothing.
constexpr std::int64_t kFirstExploreGap = 16;
constexpr std::int64_t kLastExploreGap = 512;
// ... and only when its expected cost (the steps' extra seconds, a draft
// model's catch-up) is at most this share of the time the batch size has run
// since the last retry, so that looking around never costs more than that.
constexpr double kExploreShare = 0.02;
// A proposer is behind when it must feed more than this many tokens per
// candidate before it can propose (a step adds one or two).
constexpr std::int64_t kBehindTokens = 4;
// A trial that needs a catch-up is made when the catch-up costs at most this
// share of what proposals could save over the candidates' remaining steps.
constexpr double kSwitchShare = 0.5;
// The share of a step proposals could save where no batch this size or
// smaller measured them, and the least assumed where one did (a retry must
// stay possible: costs change).
constexpr double kUnknownSaving = 0.5;
constexpr double kLeastSaving = 0.05;

double ratio(double hits, double trials, double prior, double weight) {
  return (hits + prior * weight) / (trials + weight);
}

}  // namespace

SpeculationController::SpeculationController(int max_tokens, bool adaptive)
    : max_tokens_(max_tokens), adaptive_(adaptive) {
  for (int k = 0; k < max_tokens_; k = k == 0 ? 1 : 2 * k) ladder_.push_back(k);
  ladder_.push_back(max_tokens_);
  for (auto& c : costs_) c.assign(ladder_.size(), Cost{});
  explore_gap_.fill(kFirstExploreGap);
  next_explore_.fill(kFirstExploreGap);
}

int SpeculationController::bucket_of(int num_decoding) {
  const auto n = static_cast<unsigned>(std::max(1, num_decoding));
  return std::min(kNumBuckets - 1, static_cast<int>(std::bit_width(n - 1)));
}

int SpeculationController::choose(std::span<const SequenceId> candidates, int num_decoding, const Outlook& outlook) {
  bucket_ = bucket_of(num_decoding);
  choice_ = 0;
  if (!adaptive_) {
    choice_ = ladder_.size() - 1;
    return max_tokens_;
  }
  if (candidates.empty()) return 0;
  const int b = bucket_;
  const std::vector<Cost>& costs = costs_[static_cast<std::size_t>(b)];
  trial_ = false;
  if (outlook.prompts_pending) {
    // The step will feed prompts too, so its cost teaches nothing: no
    // trial, the best choice measured so far (none before any).
    exploring_ = false;
    choice_ = best_measured(candidates, num_decoding);
    return ladder_[choice_];
  }
  const std::int64_t step = ++num_steps_[static_cast<std::size_t>(b)];
  if (exploring_ && last_bucket_ == b) {
    // The second step of a trial: the one whose cost is kept.
    exploring_ = false;
    trial_ = true;
    choice_ = last_choice_;
    return ladder_[choice_];
  }
  exploring_ = false;
  // The first steps climb the ladder from no proposals up, each choice
  // tried once the one below it beat the one below that; where the climb
  // stops, the most proposals get one look if they could win (a draft
  // model's first proposal carries costs the later ones share: one can lose
  // where four win), and the rest is left to exploration (trying every
  // choice where one already loses would cost more than it could teach). No
  // trial is made where the first proposals' catch-up would cost more than
  // they could earn.
  for (std::size_t i = 0; i < ladder_.size(); ++i) {
    if (costs[i].num_samples > 0) continue;
    std::size_t next = i;
    const double below = i >= 2 ? rate(candidates, num_decoding, i - 2) : 0.0;
    if (i >= 2 && rate(candidates, num_decoding, i - 1) <= below) {
      // The most proposals cost at least what the losing choice did, and a
      // draft model's further proposals a step each (its relative cost of a
      // target step; nothing for a lookup): no look where even at that cost
      // their expected tokens would lose too (little acceptance: a draft
      // model's look is dear).
      const std::size_t top = ladder_.size() - 1;
      const double top_seconds =
          costs[i - 1].seconds + (ladder_[top] - ladder_[i - 1]) * outlook.relative_cost * costs[0].seconds;
      const double best_case = expected_step_tokens(candidates, num_decoding, top) / top_seconds;
      if (costs[top].num_samples > 0 || best_case <= below) break;
      next = top;
    }
    if (next >= 1 && !worth_a_trial(candidates, num_decoding, outlook)) break;
    exploring_ = true;
    choice_ = next;
    return ladder_[next];
  }
  const std::size_t best = best_measured(candidates, num_decoding);
  const auto bi = static_cast<std::size_t>(b);
  if (best != best_[bi]) {
    // The best choice moved: look around it soon again.
    best_[bi] = best;
    explore_gap_[bi] = kFirstExploreGap;
    next_explore_[bi] = step + kFirstExploreGap;
  }
  choice_ = best;
  if (step >= next_explore_[bi]) {
    // Retry a neighbour, below and above in turn: costs drift (contexts
    // grow, other work shares the machine) and so does acceptance.
    upward_[bi] = !upward_[bi];
    std::size_t n = best;
    if (upward_[bi] && best + 1 < ladder_.size()) n = best + 1;
    if (!upward_[bi] && best > 0) n = best - 1;
    if (n == best) n = best + 1 < ladder_.size() ? best + 1 : best - 1;
    if (n != best && n < ladder_.size() && (n == 0 || worth_a_trial(candidates, num_decoding, outlook))) {
      const double cost = retry_seconds(b, best, n, candidates.size(), outlook);
      if (cost > kExploreShare * since_explore_[bi]) {
        // Not yet: the same retry once more time has passed.
        upward_[bi] = !upward_[bi];
        next_explore_[bi] = step + explore_gap_[bi];
        return ladder_[choice_];
      }
      choice_ = n;
      exploring_ = true;
      if (cost > 0.0) since_explore_[bi] = 0.0;
    }
    explore_gap_[bi] = std::min(kLastExploreGap, 2 * explore_gap_[bi]);
    next_explore_[bi] = step + explore_gap_[bi];
  }
  return ladder_[choice_];
}

void SpeculationController::step_done(double seconds, bool decode_only, std::int64_t prompt_tokens) {
  if (!decode_only && prompt_tokens > 0) {
    prompts_.seconds += seconds;
    prompts_.tokens += static_cast<double>(prompt_tokens);
  }
  if (bucket_ < 0) return;
  since_explore_[static_cast<std::size_t>(bucket_)] += seconds;
  if (decode_only && adaptive_ && bucket_ == last_bucket_ && choice_ == last_choice_) {
    Cost& c = costs_[static_cast<std::size_t>(bucket_)][choice_];
    // A retried choice was last measured long ago: start again from now.
    if (trial_) c.num_samples = 0;
    c.num_samples = std::min(c.num_samples + 1, kCostMemory);
    c.seconds += (seconds - c.seconds) / c.num_samples;
  }
  // A step that fed a prompt teaches nothing and breaks the run of equal
  // choices: the next step's cost would carry this one's switch.
  last_bucket_ = decode_only ? bucket_ : -1;
  last_choice_ = choice_;
  bucket_ = -1;
}

void SpeculationController::caught_up(std::int64_t tokens, int num_sequences, double seconds) {
  if (tokens <= kBehindTokens * num_sequences) return;
  catch_up_.seconds += seconds;
  catch_up_.tokens += static_cast<double>(tokens);
}

std::size_t SpeculationController::best_measured(std::span<const SequenceId> candidates, int num_decoding) const {
  const std::vector<Cost>& costs = costs_[static_cast<std::size_t>(bucket_of(num_decoding))];
  std::size_t best = 0;
  double best_rate = -1.0;
  for (std::size_t i = 0; i < ladder_.size(); ++i) {
    if (costs[i].num_samples == 0) continue;
    const double r = rate(candidates, num_decoding, i);
    if (r > best_rate) best_rate = r, best = i;
  }
  return best;
}

double SpeculationController::catch_up_seconds(std::size_t num_candidates, const Outlook& outlook) const {
  if (outlook.backlog_tokens <= kBehindTokens * static_cast<std::int64_t>(num_candidates)) return 0.0;
  double per_token = 0.0;
  if (catch_up_.tokens > 0) {
    per_token = catch_up_.seconds / catch_up_.tokens;
  } else if (prompts_.tokens > 0) {
    per_token = outlook.relative_cost * prompts_.seconds / prompts_.tokens;
  }
  return per_token * static_cast<double>(outlook.backlog_tokens);
}

double SpeculationController::retry_seconds(int bucket, std::size_t best, std::size_t choice,
                                            std::size_t num_candidates, const Outlook& outlook) const {
  const std::vector<Cost>& costs = costs_[static_cast<std::size_t>(bucket)];
  // A trial is two steps; a choice not measured at this size is taken to
  // double a step.
  const double step = costs[best].seconds;
  const double extra = costs[choice].num_samples > 0 ? std::max(0.0, costs[choice].seconds - step) : step;
  return 2.0 * extra + (ladder_[choice] > 0 ? catch_up_seconds(num_candidates, outlook) : 0.0);
}

bool SpeculationController::worth_a_trial(std::span<const SequenceId> candidates, int num_decoding,
                                          const Outlook& outlook) const {
  const double switch_seconds = catch_up_seconds(candidates.size(), outlook);
  if (switch_seconds <= 0.0) return true;
  // What proposals could save: the largest share of a step they saved at
  // this batch size or a smaller one (they earn less as batches grow and
  // steps turn compute-bound), little where all of those found them losing.
  const int b = bucket_of(num_decoding);
  bool measured = false;
  double saving = kLeastSaving;
  for (int s = 0; s <= b; ++s) {
    const std::vector<Cost>& costs = costs_[static_cast<std::size_t>(s)];
    if (costs[0].num_samples == 0) continue;
    const double base = rate_at(s, candidates, num_decoding, 0);
    for (std::size_t i = 1; i < ladder_.size(); ++i) {
      if (costs[i].num_samples == 0) continue;
      measured = true;
      saving = std::max(saving, 1.0 - base / rate_at(s, candidates, num_decoding, i));
    }
  }
  if (!measured) saving = kUnknownSaving;
  // The climb measures no proposals before any, so a step's cost is known.
  const double step = costs_[static_cast<std::size_t>(b)][0].seconds;
  return switch_seconds <= kSwitchShare * saving * step * outlook.remaining_steps;
}

void SpeculationController::decay(Acceptance& a) {
  if (a.accepted + a.rejected > kWindow) {
    a.accepted /= 2;
    a.rejected /= 2;
  }
  if (a.asked > kWindow) {
    a.asked /= 2;
    a.given /= 2;
  }
}

void SpeculationController::proposed(SequenceId id, int num_proposed) {
  for (Acceptance* a : {&sequences_[id], &all_}) {
    a->asked += 1;
    a->given += num_proposed > 0 ? 1 : 0;
    decay(*a);
  }
}

void SpeculationController::verified(SequenceId id, int num_proposed, int num_accepted) {
  if (num_proposed <= 0) return;
  for (Acceptance* a : {&sequences_[id], &all_}) {
    a->accepted += num_accepted;
    a->rejected += num_accepted < num_proposed ? 1 : 0;
    decay(*a);
  }
}

void SpeculationController::release(SequenceId id) { sequences_.erase(id); }

double SpeculationController::expected_tokens(SequenceId id, int k) const {
  // Each proposal is kept with probability alpha given the ones before it
  // were (the geometric model; its rate is kept / (kept + rejections)), and
  // a step proposes at all with probability p.
  const double pooled_alpha = ratio(all_.accepted, all_.accepted + all_.rejected, 0.5, 2.0);
  const double pooled_p = ratio(all_.given, all_.asked, 0.5, 2.0);
  Acceptance own;
  if (auto it = sequences_.find(id); it != sequences_.end()) own = it->second;
  const double alpha = ratio(own.accepted, own.accepted + own.rejected, pooled_alpha, kPriorWeight);
  const double p = ratio(own.given, own.asked, pooled_p, kPriorWeight);
  double gain = 0.0, term = 1.0;
  for (int j = 0; j < k; ++j) {
    term *= alpha;
    gain += term;
  }
  return 1.0 + p * gain;
}

double SpeculationController::step_seconds(int num_decoding, int k) const {
  const auto& costs = costs_[static_cast<std::size_t>(bucket_of(num_decoding))];
  for (std::size_t i = 0; i < ladder_.size(); ++i)
    if (ladder_[i] == k && costs[i].num_samples > 0) return costs[i].seconds;
  return -1.0;
}

double SpeculationController::rate(std::span<const SequenceId> candidates, int num_decoding, std::size_t choice) const {
  return rate_at(bucket_of(num_decoding), candidates, num_decoding, choice);
}

double SpeculationController::rate_at(int bucket, std::span<const SequenceId> candidates, int num_decoding,
                                      std::size_t choice) const {
  const Cost& c = costs_[static_cast<std::size_t>(bucket)][choice];
  return expected_step_tokens(candidates, num_decoding, choice) / std::max(c.seconds, 1e-9);
}

double SpeculationController::expected_step_tokens(std::span<const SequenceId> candidates, int num_decoding,
                                                   std::size_t choice) const {
  // Sequences that may not speculate emit one token whatever is chosen.
  double tokens = static_cast<double>(num_decoding - static_cast<int>(candidates.size()));
  for (SequenceId id : candidates) tokens += expected_tokens(id, ladder_[choice]);
  return tokens;
}

}  // namespace folio
