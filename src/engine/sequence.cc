#include "engine/sequence.h"

#include <algorithm>

namespace folio {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "stop";
}

Sequence::Sequence(const Tokenizer& tokenizer, const SamplingParams& params, std::span<const TokenId> prompt, int index,
                   SamplingRng rng)
    : tokenizer_(tokenizer),
      params_(params),
      index_(index),
      rng_(rng),
      prompt_counts_(prompt),
      decoder_(tokenizer, /*render_special=*/!params.skip_special_tokens),
      budget_(params.reasoning_budget) {
  delta_.index = index_;
  if (params_.constraint) matcher_ = std::make_unique<ConstraintMatcher>(params_.constraint);
  params_.held_back.clear();
  if (params_.min_tokens > 0 && !params_.constraint) {
    const std::vector<TokenId>& eog = tokenizer.vocab().end_of_generation_ids;
    if (!params_.ignore_eos) params_.held_back = eog;
    params_.held_back.insert(params_.held_back.end(), params_.stop_token_ids.begin(), params_.stop_token_ids.end());
    std::sort(params_.held_back.begin(), params_.held_back.end());
    params_.held_back.erase(std::unique(params_.held_back.begin(), params_.held_back.end()), params_.held_back.end());
  }
}

bool Sequence::append(const SampledToken& token) {
  if (finished()) return true;
  output_.push_back(token.token);
  output_counts_.add(token.token);
  budget_.take(token.token);
  delta_.token_ids.push_back(token.token);
  if (params_.logprobs) delta_.logprobs.push_back(token);
  // The sampler chose from the constraint's mask, so the matcher takes the
  // token; one it refused anyway, or a constraint that has taken its end
  // token, ends the completion.
  const bool constraint_done = matcher_ && (!matcher_->accept(token.token) || matcher_->is_terminated());

  const Vocab& vocab = tokenizer_.vocab();
  if (!params_.ignore_eos && vocab.is_end_of_generation(token.token)) {
    finish(FinishReason::kStop);
    return true;
  }
  if (std::find(params_.stop_token_ids.begin(), params_.stop_token_ids.end(), token.token) !=
      params_.stop_token_ids.end()) {
    delta_.stop_reason = std::to_string(token.token);
    delta_.stop_token = token.token;
    finish(FinishReason::kStop);
    return true;
  }
  if (constraint_done && vocab.is_end_of_generation(token.token)) {
    finish(FinishReason::kStop);
    return true;
  }
  held_ += decoder_.push(token.token);
  release_text(/*final=*/false);
  if (finished()) return true;
  if (constraint_done) {
    finish(FinishReason::kStop);
    return true;
  }
  if (params_.max_tokens && num_output_tokens() >= *params_.max_tokens) {
    finish(FinishReason::kLength);
    return true;
  }
  return false;
}

void Sequence::release_text(bool final) {
  // A stop string found in the held text ends the completion; the text
  // before it is released, the stop string and anything after it are not.
  // Before min_tokens no stop string counts, and none is held back for.
  const bool stops_apply = num_output_tokens() >= params_.min_tokens;
  std::size_t cut = std::string::npos;
  const std::string* matched = nullptr;
  for (const std::string& stop : params_.stop) {
    if (!stops_apply) break;
    if (stop.empty()) continue;
    std::size_t at = held_.find(stop);
    if (at != std::string::npos && at < cut) {
      cut = at;
      matched = &stop;
    }
  }
  if (matched != nullptr) {
    delta_.text += held_.substr(0, params_.include_stop_str_in_output ? cut + matched->size() : cut);
    delta_.stop_reason = *matched;
    held_.clear();
    finish_reason_ = FinishReason::kStop;
    return;
  }
  // Otherwise hold back the longest tail that could still begin a stop string.
  std::size_t keep = 0;
  if (!final && stops_apply) {
    for (const std::string& stop : params_.stop)
      for (std::size_t len = stop.empty() ? 0 : std::min(stop.size() - 1, held_.size()); len > keep; --len)
        if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
          keep = len;
          break;
        }
  }
  delta_.text += held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
}

void Sequence::finish(FinishReason reason) {
  if (finished()) return;
  if (reason != FinishReason::kAbort) {
    held_ += decoder_.flush();
    release_text(/*final=*/true);
  }
  if (!finished()) finish_reason_ = reason;
}

CompletionDelta Sequence::take_delta() {
  CompletionDelta out = std::move(delta_);
  delta_ = CompletionDelta{};
  delta_.index = index_;
  if (finished() && !finish_reported_) {
    out.finish_reason = finish_reason_;
    finish_reported_ = true;
  }
  return out;
}

}  // namespace folio
