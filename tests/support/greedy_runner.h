// GreedyRunner: drives a ModelRunner directly for tests of the forward pass:
// teacher-forced logits of whole sequences, and greedy continuations of many
// prompts decoded side by side (one forward pass per step for all of them).
// Each sequence owns a fixed range of cache blocks; no scheduler involved.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/model_runner.h"
#include "kv/kv_storage.h"
#include "kv/state_storage.h"
#include "model/model_loader.h"

namespace folio::testing {

class GreedyRunner {
 public:
  // max_context: most tokens per sequence; max_seqs: sequences decoded at once.
  GreedyRunner(Backend& backend, LoadedModel& model, std::int64_t max_context, std::int64_t max_seqs,
               DType kv_dtype = DType::F32, std::int64_t max_batched_tokens = 512);

  // Logits for every position of `ids` fed in one prefill (in chunks of
  // chunk_tokens when > 0): [ids.size() * vocab].
  std::vector<float> teacher_forced(std::span<const TokenId> ids, std::int64_t chunk_tokens = 0);

  // Greedy continuations of up to max_seqs prompts, decoded as one batch;
  // stops a sequence at an end-of-generation id in `stop_ids`.
  std::vector<std::vector<TokenId>> greedy(const std::vector<std::vector<TokenId>>& prompts, int max_new_tokens,
                                           std::span<const TokenId> stop_ids);

  std::int64_t vocab_size() const { return model_.config.vocab_size; }

 private:
  const BlockTable* table(std::int64_t seq) const;

  LoadedModel& model_;
  std::int64_t blocks_per_seq_;
  KvStorage kv_;
  std::unique_ptr<StateStorage> state_;  // a hybrid model's, one slot per sequence
  std::unique_ptr<ModelRunner> runner_;
  std::vector<BlockTable> tables_;  // sequence s owns blocks [s * blocks_per_seq, (s + 1) * blocks_per_seq)
  std::vector<float> host_logits_;
};

// A greedy continuation of llama.cpp's (from a golden): its tokens and its
// top-1/top-2 logit margin at each step.
struct LlamaCppContinuation {
  std::vector<TokenId> prompt;
  std::vector<TokenId> tokens;
  std::vector<double> margins;
};

struct TrajectoryAgreement {
  int steps = 0;
  int agree = 0;               // steps where folio's top token is llama.cpp's
  int decisive = 0;            // steps where llama.cpp's margin exceeds the threshold
  int decisive_agree = 0;
  double worst_disagreement_margin = 0;  // llama.cpp's largest margin where the two differ
};

// Walks llama.cpp's own trajectories: folio reads each prompt plus llama.cpp's
// continuation teacher-forced and picks its next token at every step (after a
// near-tie the two would otherwise write different texts, and nothing later
// would be comparable).
TrajectoryAgreement follow_llama_cpp(GreedyRunner& runner, const std::vector<LlamaCppContinuation>& cases,
                                     double decisive_margin);

}  // namespace folio::testing
