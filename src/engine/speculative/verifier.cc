#include "engine/speculative/verifier.h"

namespace folio {

VerifyResult verify_draft(Sampler& sampler, std::span<const float> logits, std::int64_t vocab_size,
                          std::span<const TokenId> draft, const SamplingParams& params,
                          const TokenCounts& prompt_counts, TokenCounts& output_counts, SamplingRng& rng,
                          std::vector<float>& scratch, std::span<const std::uint32_t> masks,
                          std::size_t mask_words) {
  VerifyResult r;
  const auto V = static_cast<std::size_t>(vocab_size);
  auto row = [&](std::size_t i) { return logits.subspan(i * V, V); };
  auto mask = [&](std::size_t i) {
    return masks.empty() ? std::span<const std::uint32_t>() : masks.subspan(i * mask_words, mask_words);
  };
  auto with_logprobs = [&](std::size_t i, TokenId token) {
    SampledToken t;
    t.token = token;
    if (params.logprobs) Sampler::fill_logprobs(sampler.masked(row(i), mask(i)), token, *params.logprobs, t);
    return t;
  };
  std::size_t i = 0;
  for (; i < draft.size(); ++i) {
    const TokenId d = draft[i];
    if (params.is_greedy()) {
      SampledToken target = sampler.sample(row(i), params, prompt_counts, output_counts, rng, mask(i));
      if (target.token != d) {
        r.emitted.push_back(target);
        break;
      }
    } else {
      scratch.resize(V);
      sampler.processed_probs(row(i), params, prompt_counts, output_counts, scratch, mask(i));
      if (!(rng.uniform() < static_cast<double>(scratch[static_cast<std::size_t>(d)]))) {
        scratch[static_cast<std::size_t>(d)] = 0.0f;
        r.emitted.push_back(with_logprobs(i, Sampler::sample_from(scratch, rng)));
        break;
      }
    }
    r.emitted.push_back(with_logprobs(i, d));
    output_counts.add(d);
    ++r.num_accepted;
  }
  if (i == draft.size())
    r.emitted.push_back(sampler.sample(row(i), params, prompt_counts, output_counts, rng, mask(i)));
  for (int a = 0; a < r.num_accepted; ++a) output_counts.remove(draft[static_cast<std::size_t>(a)]);
  return r;
}

}  // namespace folio
