// ConstraintMatcher: one sequence's place in its compiled constraint. It
// says which tokens may come next (a bitset, bit t of word t / 32 set when
// token t is allowed), takes each token the sequence emits, and rolls back
// tokens that speculative decoding tried and dropped.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "engine/constraint/constraint_compiler.h"

namespace folio {

class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(std::shared_ptr<const CompiledConstraint> compiled);
  ~ConstraintMatcher();
  ConstraintMatcher(ConstraintMatcher&&) noexcept;
  ConstraintMatcher& operator=(ConstraintMatcher&&) noexcept;

  // words: [mask_words()]; every word is written.
  void fill_next_token_mask(std::span<std::uint32_t> words);
  // Advances by one token; false (and no change) when the constraint does
  // not allow it here.
  bool accept(TokenId token);
  // Undoes the last num_tokens accepted tokens.
  void rollback(int num_tokens);
  // The constraint is complete and has taken its end (a stop token).
  bool is_terminated() const;
  // The output so far is complete: a stop token may come next.
  bool can_end() const;
  std::int32_t mask_words() const { return compiled_->mask_words(); }

 private:
  struct Impl;
  std::shared_ptr<const CompiledConstraint> compiled_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace folio
