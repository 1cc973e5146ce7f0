// DraftModelProposer: a smaller model with the same vocabulary proposes the
// next tokens greedily, with its own paged KV cache. Per sequence it keeps
// the KV of the tokens the target has verified; each round it catches up on
// the tokens verification added (one or two), then decodes k proposals,
// batched across sequences, and after verification rolls its cache back to
// what was accepted.
#pragma once

#include <memory>
#include <unordered_map>

#include "engine/model_runner.h"
#include "engine/model_session.h"
#include "engine/speculative/proposer.h"
#include "engine/speculative/speculative_config.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_storage.h"

namespace folio {

class DraftModelProposer : public Proposer {
 public:
  // Throws Error when the draft's vocabulary differs from the target's. The
  // draft's cache holds kv_dtype, as the target's does (--kv-cache-dtype).
  DraftModelProposer(const ModelSession& target, std::shared_ptr<ModelSession> draft, int max_num_seqs,
                     int max_model_len, KvCacheDType kv_dtype = {});
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<TokenId>>& out) override;
  void accepted(SequenceId id, int num_accepted) override;
  void release(SequenceId id) override;
  std::int64_t backlog(std::span<const ProposalRequest> requests) const override;
  // The draft's weight bytes over the target's: prefill is compute-bound,
  // its cost follows the weights.
  double relative_cost() const override { return relative_cost_; }
  KvCacheDType kv_dtype() const { return storage_->dtype(); }

 private:
  struct State {
    int computed = 0;  // tokens whose KV is in the draft cache and verified
    int fed = 0;       // tokens fed so far, proposals included
    int base = 0;      // the sequence's length when the last proposals were made
    int proposed = 0;
  };

  std::shared_ptr<ModelSession> draft_;
  std::int64_t max_model_len_;
  double relative_cost_ = 0.0;
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<ModelRunner> runner_;
  std::unordered_map<SequenceId, State> states_;
};

// The proposer for SpeculativeConfig::Method::kDraft; its cache holds kv_dtype.
std::unique_ptr<Proposer> make_draft_model_proposer(const ModelSession& target, const SpeculativeConfig& config,
                                                    int max_num_seqs, int max_model_len, KvCacheDType kv_dtype);

}  // namespace folio
