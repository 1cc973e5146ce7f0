// The engine's exactness on one model, as every family's tiny checkpoint is
// held to it: each probe prompt's greedy tokens, run alone, are the same
// batched with the others, at every prefill chunk size, after a prefix-cache
// hit on all its whole blocks (where the model's engine caches prefixes),
// and under preemption.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace folio::testing {

struct InvarianceCase {
  int max_model_len = 128;
  int max_num_batched_tokens = 256;
  std::int64_t num_blocks = 128;            // roomy: nothing is preempted
  std::int64_t num_preempting_blocks = 14;  // too few for all the prompts at once
  std::vector<int> chunk_sizes = {1, 7, 16};
  int num_prompts = 8;
  int first_prompt_len = 20;  // prompt p has first_prompt_len + p * prompt_len_step tokens
  int prompt_len_step = 6;
  int num_generated = 24;
  // false: a model whose engine keeps prefix caching off (a recurrent state
  // per sequence, issue 42): no prefix-hit case.
  bool prefix_hits = true;
};

inline EngineConfig invariance_config(const InvarianceCase& c, int batched_tokens, std::int64_t blocks,
                                      bool caching = true) {
  EngineConfig e;
  e.max_num_batched_tokens = batched_tokens;
  e.max_num_seqs = 16;
  e.max_model_len = c.max_model_len;
  e.kv_num_blocks = blocks;
  e.enable_prefix_caching = caching;
  return e;
}

inline EngineRequest greedy_request(std::vector<TokenId> prompt, int max_tokens) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

// The tokens a stream gives; `usage` (optional) gets its last usage.
inline std::vector<TokenId> stream_tokens(RequestStream& stream, Usage* usage = nullptr) {
  std::vector<TokenId> out;
  while (auto o = stream.next()) {
    EXPECT_EQ(o->error, "");
    for (const auto& d : o->deltas) out.insert(out.end(), d.token_ids.begin(), d.token_ids.end());
    if (usage != nullptr) *usage = o->usage;
    if (o->finished) break;
  }
  return out;
}

// Prompts spread over the vocabulary.
inline std::vector<std::vector<TokenId>> invariance_prompts(const InvarianceCase& c, std::int64_t vocab) {
  std::vector<std::vector<TokenId>> out;
  for (int p = 0; p < c.num_prompts; ++p) {
    std::vector<TokenId> ids;
    for (int i = 0; i < c.first_prompt_len + c.prompt_len_step * p; ++i)
      ids.push_back(static_cast<TokenId>((7 + 31 * i + 53 * p) % vocab));
    out.push_back(ids);
  }
  return out;
}

inline void expect_engine_invariance(const std::shared_ptr<ModelSession>& session, const InvarianceCase& c) {
  const auto texts = invariance_prompts(c, session->config().vocab_size);
  const int n = c.num_generated;
  auto config = [&c](int batched, std::int64_t blocks) { return invariance_config(c, batched, blocks); };
  std::vector<std::vector<TokenId>> alone;
  for (const auto& t : texts) {
    Engine engine(session, invariance_config(c, c.max_num_batched_tokens, c.num_blocks, /*caching=*/false));
    alone.push_back(stream_tokens(*engine.submit(greedy_request(t, n))));
    ASSERT_EQ(alone.back().size(), static_cast<std::size_t>(n));
  }
  {
    SCOPED_TRACE("batched");
    Engine engine(session, config(c.max_num_batched_tokens, c.num_blocks));
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& t : texts) streams.push_back(engine.submit(greedy_request(t, n)));
    for (std::size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(stream_tokens(*streams[i]), alone[i]) << i;
  }
  const std::size_t last = texts.size() - 1;  // the longest prompt
  for (int chunk : c.chunk_sizes) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    Engine engine(session, config(chunk, c.num_blocks));
    EXPECT_EQ(stream_tokens(*engine.submit(greedy_request(texts[last], n))), alone[last]);
  }
  if (c.prefix_hits) {
    SCOPED_TRACE("prefix hit");
    Engine engine(session, config(c.max_num_batched_tokens, c.num_blocks));
    std::vector<TokenId> other = texts[last];
    other.back() = static_cast<TokenId>((other.back() + 1) % session->config().vocab_size);
    stream_tokens(*engine.submit(greedy_request(other, 4)));  // caches the longest prompt's whole blocks
    Usage usage;
    EXPECT_EQ(stream_tokens(*engine.submit(greedy_request(texts[last], n)), &usage), alone[last]);
    const int block_size = engine.stats().kv.block_size;
    EXPECT_EQ(usage.cached_tokens, static_cast<int>(texts[last].size()) / block_size * block_size);
  }
  {
    SCOPED_TRACE("preemption");
    Engine engine(session, config(c.max_num_batched_tokens, c.num_preempting_blocks));
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& t : texts) streams.push_back(engine.submit(greedy_request(t, n)));
    for (std::size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(stream_tokens(*streams[i]), alone[i]) << i;
    EXPECT_GT(engine.stats().num_preemptions, 0);
  }
}

}  // namespace folio::testing
