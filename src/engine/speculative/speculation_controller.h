// SpeculationController: how many tokens to propose each decode step, chosen
// from what steps are measured to cost and what proposals are measured to
// earn, so that speculation runs only where it pays (zero proposals
// included). Outputs never depend on the choice: verification is exact for
// any number of proposals. Pure logic: the engine hands it step times.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_types.h"

namespace folio {

// What the first proposals after a stretch without any would cost beyond
// the step: a draft model feeds the tokens it skipped (its backlog) before
// it can propose. Trying proposals is worth that only if the candidates
// have steps enough left to earn it back.
struct SpeculationOutlook {
  std::int64_t backlog_tokens = 0;  // tokens the proposer must feed first, all candidates together
  double remaining_steps = 0;       // decode steps the candidates have left, on average
  // A proposer's cost per token fed over the target's (0: free): of its
  // catch-up, and of each proposal after the first.
  double relative_cost = 0;
  bool prompts_pending = false;     // the step will feed prompts too (its cost says nothing of the choice)
};

class SpeculationController {
 public:
  using Outlook = SpeculationOutlook;

  // max_tokens: the most proposals a step may make (--num-speculative-tokens).
  // adaptive false: always max_tokens (the fixed policy).
  SpeculationController(int max_tokens, bool adaptive);

  // Proposals per sequence for a step with `num_decoding` decoding sequences,
  // of which `candidates` may speculate. 0: propose nothing this step.
  int choose(std::span<const SequenceId> candidates, int num_decoding, const Outlook& outlook = {});
  // The step just chosen for ran in `seconds`; `decode_only` when no prompt
  // was fed in it (only those steps teach what a choice costs). A step that
  // fed `prompt_tokens` of prompts bounds what the target takes per token
  // fed, the estimate of a catch-up's cost until one is measured.
  void step_done(double seconds, bool decode_only, std::int64_t prompt_tokens = 0);
  // The proposer fed a backlog of `tokens` for `num_sequences` (and made
  // its proposals) in `seconds`: what catching up costs per token, at most
  // (kept where the backlog is more than a step's few tokens).
  void caught_up(std::int64_t tokens, int num_sequences, double seconds);
  // A sequence was asked for proposals and got `num_proposed` (an n-gram
  // lookup may find none); verification kept `num_accepted` of them.
  void proposed(SequenceId id, int num_proposed);
  void verified(SequenceId id, int num_proposed, int num_accepted);
  void release(SequenceId id);

  // Expected tokens a step emits for a sequence given k proposals, from its
  // acceptance so far (the model behind choose; exposed for tests).
  double expected_tokens(SequenceId id, int k) const;
  // The measured mean seconds of a decode step of `num_decoding` sequences
  // with k proposals each; negative when not measured yet.
  double step_seconds(int num_decoding, int k) const;

 private:
  // Counts of one sequence's proposals, or of all (the prior of a new one).
  struct Acceptance {
    double accepted = 0;  // proposals kept
    double rejected = 0;  // verifications that stopped at a rejection
    double asked = 0;     // times proposals were asked for
    double given = 0;     // ... and at least one came back
  };
  // The measured cost of one choice at one batch size bucket.
  struct Cost {
    double seconds = 0;
    int num_samples = 0;
  };
  // Seconds spent on so many tokens.
  struct Throughput {
    double seconds = 0;
    double tokens = 0;
  };
  // Batch sizes 1, 2, 3-4, 5-8, ... share a cost table.
  static constexpr int kNumBuckets = 12;

  static int bucket_of(int num_decoding);
  double rate(std::span<const SequenceId> candidates, int num_decoding, std::size_t choice) const;
  double rate_at(int bucket, std::span<const SequenceId> candidates, int num_decoding, std::size_t choice) const;
  // Tokens a step of `num_decoding` sequences is expected to emit with this choice.
  double expected_step_tokens(std::span<const SequenceId> candidates, int num_decoding, std::size_t choice) const;
  // The choice with the highest predicted rate among those measured at this
  // batch size (0 where none is).
  std::size_t best_measured(std::span<const SequenceId> candidates, int num_decoding) const;
  // Whether proposals may be tried this step: free when the proposer is not
  // behind, else when its catch-up costs less than what they could earn.
  bool worth_a_trial(std::span<const SequenceId> candidates, int num_decoding, const Outlook& outlook) const;
  // What the proposer's backlog costs to feed before it can propose (0 when
  // it is not behind), from measured catch-ups or the prompts' cost.
  double catch_up_seconds(std::size_t num_candidates, const Outlook& outlook) const;
  // The expected extra seconds of retrying `choice` instead of `best`.
  double retry_seconds(int bucket, std::size_t best, std::size_t choice, std::size_t num_candidates,
                       const Outlook& outlook) const;
  static void decay(Acceptance& a);

  int max_tokens_;
  bool adaptive_;
  std::vector<int> ladder_;  // the choices tried: 0, 1, 2, 4, ... up to max_tokens
  std::array<std::vector<Cost>, kNumBuckets> costs_;
  std::array<std::int64_t, kNumBuckets> num_steps_{};
  // Per bucket: the best choice when last looked, when to retry a neighbour
  // of it, the gap before that, and which side comes next.
  std::array<std::size_t, kNumBuckets> best_{};
  std::array<std::int64_t, kNumBuckets> next_explore_{};
  std::array<std::int64_t, kNumBuckets> explore_gap_{};
  std::array<bool, kNumBuckets> upward_{};
  std::array<double, kNumBuckets> since_explore_{};  // seconds of steps since the last retry
  std::unordered_map<SequenceId, Acceptance> sequences_;
  Acceptance all_;
  Throughput catch_up_;  // the proposer's catch-ups
  Throughput prompts_;   // steps that fed prompts
  // The step in flight, and the one before it: a cost is kept only when a
  // step repeats the previous choice, so one-off work at a switch (a draft
  // model catching up on the tokens it skipped) is not charged to it.
  int bucket_ = -1;
  std::size_t choice_ = 0;
  int last_bucket_ = -1;
  std::size_t last_choice_ = 0;
  bool exploring_ = false;  // the next step repeats this trial
  bool trial_ = false;      // this step is a trial's second: its cost replaces the old
};

}  // namespace folio
