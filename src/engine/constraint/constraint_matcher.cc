#include "engine/constraint/constraint_matcher.h"

#include "engine/constraint/constraint_impl.h"

namespace folio {

struct ConstraintMatcher::Impl {
  xgrammar::GrammarMatcher matcher;
};

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const CompiledConstraint> compiled)
    : compiled_(std::move(compiled)),
      impl_(std::make_unique<Impl>(Impl{xgrammar::GrammarMatcher(compiled_->impl().grammar)})) {}

ConstraintMatcher::~ConstraintMatcher() = default;
ConstraintMatcher::ConstraintMatcher(ConstraintMatcher&&) noexcept = default;
ConstraintMatcher& ConstraintMatcher::operator=(ConstraintMatcher&&) noexcept = default;

void ConstraintMatcher::fill_next_token_mask(std::span<std::uint32_t> words) {
  if (words.size() != static_cast<std::size_t>(mask_words()))
    fail("a token mask of {} words was given where the vocabulary needs {}", words.size(), mask_words());
  std::int64_t shape[1] = {mask_words()};
  DLTensor t{};
  t.data = words.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = shape;
  impl_->matcher.FillNextTokenBitmask(&t);
}

bool ConstraintMatcher::accept(TokenId token) {
  if (token < 0 || token >= compiled_->vocab_size()) return false;
  return impl_->matcher.AcceptToken(token);
}

void ConstraintMatcher::rollback(int num_tokens) {
  if (num_tokens > 0) impl_->matcher.Rollback(num_tokens);
}

bool ConstraintMatcher::is_terminated() const { return impl_->matcher.IsTerminated(); }
bool ConstraintMatcher::can_end() const { return impl_->matcher.IsCompleted(); }

}  // namespace folio
