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
  std::span<const std::int32_t> table(std::int64_t seq) const;

  LoadedModel& model_;
  std::int64_t blocks_per_seq_;
  KvStorage kv_;
  std::unique_ptr<ModelRunner> runner_;
  std::vector<std::int32_t> tables_;
};

}  // namespace folio::testing
