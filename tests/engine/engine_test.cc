// The engine on a real model (SmolLM2): continuous batching, chunked prefill,
// preemption and prefix caching never change a greedy output (docs/architecture.md rule
// 5, asserted with ==), with f16 and quantized KV caches alike, n > 1, stop
// strings, aborts, and the pool returns to fully free after every run.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "engine/speculative/draft_model_proposer.h"
#include "kv/block_map.h"
#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

struct Collected {
  std::vector<std::vector<TokenId>> tokens;  // per completion
  std::vector<std::string> text;
  std::vector<std::string> finish;
  std::vector<std::string> stop_reason;
  std::vector<std::vector<SampledToken>> logprobs;  // per completion, when asked for
  Usage usage;
  std::string error;
  std::vector<PromptTokenLogprob> prompt_logprobs;
  int num_prompt_logprob_outputs = 0;  // outputs that carried them
};

Collected collect(RequestStream& stream) {
  Collected c;
  while (auto out = stream.next()) {
    if (!out->prompt_logprobs.empty()) {
      c.prompt_logprobs = out->prompt_logprobs;
      ++c.num_prompt_logprob_outputs;
    }
    for (auto& d : out->deltas) {
      if (c.tokens.size() <= static_cast<std::size_t>(d.index)) {
        c.tokens.resize(d.index + 1);
        c.text.resize(d.index + 1);
        c.finish.resize(d.index + 1);
        c.stop_reason.resize(d.index + 1);
        c.logprobs.resize(d.index + 1);
      }
      c.logprobs[d.index].insert(c.logprobs[d.index].end(), d.logprobs.begin(), d.logprobs.end());
      c.tokens[d.index].insert(c.tokens[d.index].end(), d.token_ids.begin(), d.token_ids.end());
      c.text[d.index] += d.text;
      if (d.finish_reason) {
        c.finish[d.index] = finish_reason_name(*d.finish_reason);
        c.stop_reason[d.index] = d.stop_reason;
      }
    }
    c.usage = out->usage;
    if (!out->error.empty()) c.error = out->error;
    if (out->finished) break;
  }
  return c;
}

class EngineTest : public ::testing::Test {
 protected:
  // FOLIO_ENGINE_TEST_MODEL=dummy:PRESET[:RECIPE] runs the suite on random
  // weights of a preset's shape (the GPU machine has no model files): every
  // equality here holds for any weights; only the stop-string test reads
  // what a real model writes.
  static void SetUpTestSuite() {
    ModelSessionOptions o;
    o.backend = folio::testing::test_backend_options(2);
    const char* dummy = std::getenv("FOLIO_ENGINE_TEST_MODEL");
    if (dummy != nullptr && std::string_view(dummy).starts_with("dummy:")) {
      dummy_ = true;
      const std::string spec = std::string(dummy).substr(6);
      const auto colon = spec.find(':');
      o.load_format = "dummy";
      o.model_path = spec.substr(0, colon);
      if (colon != std::string::npos) o.dummy_weights = spec.substr(colon + 1);
    } else {
      o.model_path = folio::testing::model_path(folio::testing::kSmolLM2);
      if (o.model_path.empty()) return;
    }
    session_ = open_model_session(o);
  }
  static void TearDownTestSuite() { session_.reset(); }

  void SetUp() override {
    if (!session_) {
      FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
    }
  }

  static EngineConfig config(int batched_tokens = 512, int max_seqs = 64, std::int64_t blocks = 0,
                             bool caching = true) {
    EngineConfig c;
    c.max_num_batched_tokens = batched_tokens;
    c.max_num_seqs = max_seqs;
    c.max_model_len = 512;
    c.kv_num_blocks = blocks > 0 ? blocks : 512;
    c.enable_prefix_caching = caching;
    return c;
  }

  static EngineRequest greedy(const std::string& text, int max_tokens) {
    EngineRequest r;
    r.prompt = session_->tokenizer->encode(text, true, false);
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    return r;
  }

  static std::vector<TokenId> run_alone(const EngineConfig& c, const EngineRequest& r) {
    Engine engine(session_, c);
    return collect(*engine.submit(r)).tokens.at(0);
  }

  static void expect_pool_free(const Engine& engine) {
    // Stats are refreshed after each step; give the loop a moment after the last output.
    for (int i = 0; i < 100 && engine.stats().kv.num_used_blocks != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(engine.stats().kv.num_used_blocks, 0);
    EXPECT_EQ(engine.stats().num_running, 0);
    EXPECT_EQ(engine.stats().num_waiting, 0);
  }

  static std::vector<std::string> prompts(int n) {
    static const char* kTexts[] = {
        "The capital of France is",
        "Once upon a time",
        "def add(a, b):\n    return",
        "A list of fruits: apple, banana,",
        "The quick brown fox jumps over the lazy dog because it wanted to see what was on the other side of the "
        "fence, and the dog did not mind at all since it was",
        "1 2 3 4 5 6",
        "Water boils at",
        "In the beginning of the twentieth century, physicists discovered that",
    };
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(std::string(kTexts[i % 8]) + std::string(static_cast<std::size_t>(i / 8), '!'));
    return out;
  }

  static std::shared_ptr<ModelSession> session_;
  static bool dummy_;  // random weights: outputs repeat, and the tokenizer is byte-pair
};

std::shared_ptr<ModelSession> EngineTest::session_;
bool EngineTest::dummy_ = false;

TEST_F(EngineTest, SixtyFourConcurrentRequestsEqualTheirRunsAlone) {
  const auto texts = prompts(64);
  Engine engine(session_, config());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& t : texts) streams.push_back(engine.submit(greedy(t, 12)));
  std::vector<std::vector<TokenId>> batched;
  for (auto& s : streams) {
    Collected c = collect(*s);
    ASSERT_EQ(c.tokens.size(), 1u);
    EXPECT_EQ(c.tokens[0].size(), 12u);
    EXPECT_EQ(c.finish[0], "length");
    batched.push_back(c.tokens[0]);
  }
  expect_pool_free(engine);
  // Every eighth request, alone, gives the same tokens.
  for (int i = 0; i < 64; i += 9) EXPECT_EQ(run_alone(config(), greedy(texts[i], 12)), batched[i]) << "request " << i;
}

TEST_F(EngineTest, ChunkedPrefillAtAnyChunkSizeGivesTheSameTokens) {
  const std::string text = prompts(5)[4];  // the long one: 40+ tokens
  const auto want = run_alone(config(512), greedy(text, 10));
  for (int chunk : {1, 7, 16, 33}) {
    Engine engine(session_, config(chunk));
    EXPECT_EQ(collect(*engine.submit(greedy(text, 10))).tokens.at(0), want) << "chunk " << chunk;
    expect_pool_free(engine);
  }
}

TEST_F(EngineTest, PreemptedAndRecomputedRequestsGiveTheSameTokens) {
  const auto texts = prompts(8);
  std::vector<std::vector<TokenId>> want;
  for (const auto& t : texts) want.push_back(run_alone(config(), greedy(t, 40)));
  // 12 blocks of 16 tokens cannot hold eight sequences of ~60 tokens.
  Engine engine(session_, config(512, 64, 12));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& t : texts) streams.push_back(engine.submit(greedy(t, 40)));
  for (std::size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(collect(*streams[i]).tokens.at(0), want[i]) << i;
  EXPECT_GT(engine.stats().num_preemptions, 0);
  expect_pool_free(engine);
}

TEST_F(EngineTest, QuantizedKvGivesTheSameTokensAloneAndInABatch) {
  const auto texts = prompts(16);
  for (KvCacheDType type : {KvCacheDType(KvDType::kQ8_0), KvCacheDType(KvDType::kFp8E4M3),
                            KvCacheDType(KvDType::kQ8_0, KvDType::kF16)}) {
    SCOPED_TRACE(type.name());
    EngineConfig c = config();
    c.kv_dtype = type;
    Engine engine(session_, c);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& t : texts) streams.push_back(engine.submit(greedy(t, 12)));
    std::vector<std::vector<TokenId>> batched;
    for (auto& s : streams) batched.push_back(collect(*s).tokens.at(0));
    expect_pool_free(engine);
    for (int i = 0; i < 16; i += 5) EXPECT_EQ(run_alone(c, greedy(texts[i], 12)), batched[i]) << "request " << i;
  }
}

TEST_F(EngineTest, QuantizedKvKeepsPreemptionAndPrefixCachingExact) {
  const auto texts = prompts(8);
  EngineConfig alone = config(512, 64, 0, /*caching=*/false);
  alone.kv_dtype = KvDType::kQ8_0;
  std::vector<std::vector<TokenId>> want;
  for (const auto& t : texts) want.push_back(run_alone(alone, greedy(t, 40)));
  // 12 blocks cannot hold eight sequences of ~60 tokens: preemption, and
  // prompts recomputed or found again in the prefix cache.
  EngineConfig tight = config(512, 64, 12);
  tight.kv_dtype = KvDType::kQ8_0;
  Engine engine(session_, tight);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& t : texts) streams.push_back(engine.submit(greedy(t, 40)));
  for (std::size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(collect(*streams[i]).tokens.at(0), want[i]) << i;
  EXPECT_GT(engine.stats().num_preemptions, 0);
  expect_pool_free(engine);

  std::string shared;
  for (int i = 0; i < 12; ++i) shared += "This sentence is part of a long shared system prompt. ";
  const std::string b = shared + "Question two: name a color.";
  const auto want_b = run_alone(alone, greedy(b, 8));
  EngineConfig cached = config();
  cached.kv_dtype = KvDType::kQ8_0;
  Engine warm(session_, cached);
  collect(*warm.submit(greedy(shared + "Question one: what is two plus two?", 8)));
  Collected cb = collect(*warm.submit(greedy(b, 8)));
  EXPECT_GT(cb.usage.cached_tokens, 100);
  EXPECT_EQ(cb.tokens.at(0), want_b);
  expect_pool_free(warm);
}

TEST_F(EngineTest, PrefixCacheHitComputesOnlyTheSuffixAndChangesNothing) {
  std::string shared;
  for (int i = 0; i < 12; ++i) shared += "This sentence is part of a long shared system prompt. ";
  const std::string a = shared + "Question one: what is two plus two?";
  const std::string b = shared + "Question two: name a color.";
  const auto want_b = run_alone(config(512, 64, 0, /*caching=*/false), greedy(b, 8));

  Engine engine(session_, config());
  collect(*engine.submit(greedy(a, 8)));
  const auto before = engine.stats();
  Collected cb = collect(*engine.submit(greedy(b, 8)));
  EXPECT_EQ(cb.tokens.at(0), want_b);
  const int prompt_b = static_cast<int>(greedy(b, 8).prompt.size());
  EXPECT_GE(cb.usage.cached_tokens, 16 * ((prompt_b - 20) / 16));
  EXPECT_GT(cb.usage.cached_tokens, 100);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto after = engine.stats();
  EXPECT_EQ(after.computed_prompt_tokens - before.computed_prompt_tokens, prompt_b - cb.usage.cached_tokens);
  expect_pool_free(engine);
}

TEST_F(EngineTest, SecondRequestOnAThousandTokenPrefixComputesOnlyItsSuffix) {
  std::string shared;
  for (int i = 0; shared.size() < 5000; ++i)
    shared += "Section " + std::to_string(i) + " of the shared document describes the system in some detail. ";
  EngineConfig c = config();
  c.max_model_len = 2048;
  c.kv_num_blocks = 256;
  Engine engine(session_, c);
  auto timed = [&](const std::string& text) {
    const auto start = std::chrono::steady_clock::now();
    auto stream = engine.submit(greedy(text, 4));
    auto first = stream->next();
    const double ttft = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    collect(*stream);
    return std::pair(ttft, first->usage.cached_tokens);
  };
  const int prefix = static_cast<int>(session_->tokenizer->encode(shared, true, false).size());
  if (dummy_ && prefix + 64 > c.max_model_len)
    GTEST_SKIP() << "the dummy tokenizer spends " << prefix << " tokens on it";
  ASSERT_GE(prefix, 1000);
  const auto [ttft_a, cached_a] = timed(shared + "First question: what is described?");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto before = engine.stats();
  const std::string b = shared + "Second question: how long is it?";
  const auto [ttft_b, cached_b] = timed(b);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto after = engine.stats();
  const int prompt_b = static_cast<int>(greedy(b, 4).prompt.size());
  EXPECT_EQ(cached_a, 0);
  EXPECT_GE(cached_b, prefix / 16 * 16 - 16);
  EXPECT_EQ(after.computed_prompt_tokens - before.computed_prompt_tokens, prompt_b - cached_b);
  std::printf("shared prefix %d tokens: second request served %d of %d prompt tokens from the cache; "
              "time to first token %.1f ms vs %.1f ms (%.1fx faster)\n",
              prefix, cached_b, prompt_b, ttft_b * 1e3, ttft_a * 1e3, ttft_a / ttft_b);
  expect_pool_free(engine);
}

// Gemma 3 interleaves sliding-window layers (512 tokens) with global ones.
// A second request whose shared prefix is longer than the window is served
// from the prefix cache - blocks that its sliding-window layers no longer
// see, and that the global layers still read - and writes exactly the tokens
// it writes with the cache off, in one prefill or in chunks smaller than
// the window.
TEST(EngineSlidingWindow, PrefixCacheHitsBeyondTheWindowChangeNothing) {
  FOLIO_REQUIRE_MODEL(path, folio::testing::kGemma3);
  std::shared_ptr<ModelSession> session = folio::testing::open_test_session(folio::testing::kGemma3);
  std::string shared;
  for (int i = 0; shared.size() < 4000; ++i)
    shared += "Clause " + std::to_string(i) + " of the agreement sets out what each party must do. ";
  auto request = [&](const std::string& text) {
    EngineRequest r;
    r.prompt = session->tokenizer->encode(text, true, false);
    r.params.temperature = 0;
    r.params.max_tokens = 24;
    r.params.ignore_eos = true;
    return r;
  };
  const EngineRequest a = request(shared + "Which clause comes first?");
  const EngineRequest b = request(shared + "Summarise the agreement in one line:");
  ASSERT_GT(a.prompt.size(), 600u);
  auto config = [](bool caching, int batched_tokens) {
    EngineConfig c;
    c.max_num_batched_tokens = batched_tokens;
    c.max_model_len = 2048;
    c.kv_num_blocks = 256;
    c.enable_prefix_caching = caching;
    return c;
  };
  std::vector<TokenId> alone;
  {
    Engine engine(session, config(false, 2048));
    alone = collect(*engine.submit(b)).tokens.at(0);
  }
  for (int batched_tokens : {2048, 200}) {
    Engine engine(session, config(true, batched_tokens));
    collect(*engine.submit(a));
    auto stream = engine.submit(b);
    const Collected got = collect(*stream);
    EXPECT_GT(got.usage.cached_tokens, 512) << "the hit should reach past the window";
    EXPECT_EQ(got.tokens.at(0), alone) << "chunks of " << batched_tokens << " tokens";
  }
}

TEST_F(EngineTest, GreedyCompletionsOfOneRequestAreEqualAndShareThePrompt) {
  EngineRequest r = greedy("The best thing about mornings is", 10);
  const auto want = run_alone(config(), r);
  r.params.n = 4;
  Engine engine(session_, config());
  Collected c = collect(*engine.submit(r));
  ASSERT_EQ(c.tokens.size(), 4u);
  for (const auto& t : c.tokens) EXPECT_EQ(t, want);
  EXPECT_EQ(c.usage.completion_tokens, 40);
  // The prompt ran once for all four.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(engine.stats().computed_prompt_tokens, static_cast<std::int64_t>(r.prompt.size()));
  expect_pool_free(engine);
}

TEST_F(EngineTest, SeededSamplingIsReproducible) {
  EngineRequest r = greedy("Write a word:", 12);
  r.params.temperature = 1.0f;
  r.params.seed = 1234;
  r.params.n = 3;
  Engine engine(session_, config());
  Collected first = collect(*engine.submit(r));
  Collected second = collect(*engine.submit(r));
  EXPECT_EQ(first.tokens, second.tokens);
  EXPECT_NE(first.tokens[0], first.tokens[1]);  // seed + index: different streams
}

TEST_F(EngineTest, StopStringsEndTheTextBeforeThem) {
  EngineRequest r = greedy("Count: 1, 2, 3, 4, 5,", 30);
  const auto free_run = run_alone(config(), r);
  const std::string full = session_->tokenizer->decode(free_run, false);
  // Stop at the first ", 9" the model writes.
  ASSERT_NE(full.find(" 9"), std::string::npos) << full;
  r.params.stop = {" 9"};
  Engine engine(session_, config());
  Collected c = collect(*engine.submit(r));
  EXPECT_EQ(c.finish[0], "stop");
  EXPECT_EQ(c.stop_reason[0], " 9");
  EXPECT_EQ(c.text[0], full.substr(0, full.find(" 9")));
}

// min_tokens holds back what would end the completion - end-of-generation
// and stop_token_ids, however a bias favours them - and stop strings do not
// count before it; from then on they end it as before.
TEST_F(EngineTest, MinTokensHoldsBackEndTokensAndStopStrings) {
  if (dummy_) GTEST_SKIP() << "reads what a real model writes";
  const TokenId eog = session_->tokenizer->vocab().end_of_generation_ids.at(0);
  Engine engine(session_, config());
  EngineRequest r = greedy("Count: 1, 2, 3, 4, 5,", 30);
  r.params.ignore_eos = false;
  r.params.logit_bias = {{eog, 50.0f}};
  for (const int min_tokens : {0, 1, 7}) {
    r.params.min_tokens = min_tokens;
    Collected c = collect(*engine.submit(r));
    ASSERT_EQ(c.tokens[0].size(), static_cast<std::size_t>(min_tokens + 1)) << min_tokens;
    EXPECT_EQ(c.tokens[0].back(), eog);
    EXPECT_EQ(std::count(c.tokens[0].begin(), c.tokens[0].end(), eog), 1);
    EXPECT_EQ(c.finish[0], "stop");
  }
  // A stop token id, the same way.
  EngineRequest t = greedy("Count: 1, 2, 3, 4, 5,", 30);
  const TokenId stop = run_alone(config(), t).at(2);
  t.params.stop_token_ids = {stop};
  t.params.logit_bias = {{stop, 50.0f}};
  t.params.min_tokens = 5;
  Collected held = collect(*engine.submit(t));
  EXPECT_EQ(held.finish[0], "stop");
  EXPECT_EQ(held.stop_reason[0], std::to_string(stop));
  ASSERT_EQ(held.tokens[0].size(), 6u);
  EXPECT_EQ(std::count(held.tokens[0].begin(), held.tokens[0].end(), stop), 1);
  // Stop strings: " 7" is written early, but not counted before min_tokens.
  EngineRequest s = greedy("Count: 1, 2, 3, 4, 5,", 30);
  const std::vector<TokenId> tokens = run_alone(config(), s);
  const std::string full = session_->tokenizer->decode(tokens, false);
  ASSERT_NE(full.find(" 7"), std::string::npos) << full;
  std::size_t seven = 1;  // the output tokens that first hold " 7"
  while (session_->tokenizer->decode(std::span(tokens).first(seven), false).find(" 7") == std::string::npos) ++seven;
  s.params.stop = {" 7", " 9"};
  s.params.min_tokens = 2;
  Collected early = collect(*engine.submit(s));
  EXPECT_EQ(early.stop_reason[0], " 7");
  s.params.min_tokens = static_cast<int>(seven) + 1;
  Collected late = collect(*engine.submit(s));
  EXPECT_EQ(late.stop_reason[0], " 9");
  EXPECT_EQ(late.text[0], full.substr(0, full.find(" 9")));
  expect_pool_free(engine);
}

// prompt_logprobs: entry k is what sampling after the first k + 1 prompt
// tokens sees - the same logprob of the next prompt token and the same top
// tokens, bit for bit - whatever the chunking, the batch or the same prompt
// earlier in the prefix cache (such a prompt is computed in full).
TEST_F(EngineTest, PromptLogprobsAreTheNextTokenLogprobsOfEachPrefix) {
  EngineRequest r = greedy(prompts(5)[4], 1);
  r.params.prompt_logprobs = 5;
  const std::vector<TokenId> prompt = r.prompt;
  ASSERT_GT(prompt.size(), 30u);
  Engine engine(session_, config());
  const Collected whole = collect(*engine.submit(r));
  ASSERT_EQ(whole.prompt_logprobs.size(), prompt.size() - 1);
  EXPECT_EQ(whole.num_prompt_logprob_outputs, 1);
  auto same = [](const PromptTokenLogprob& a, const PromptTokenLogprob& b) {
    return a.token.token == b.token.token && a.token.logprob == b.token.logprob && a.rank == b.rank &&
           a.token.num_top == b.token.num_top &&
           std::equal(a.token.top.begin(), a.token.top.begin() + a.token.num_top, b.token.top.begin());
  };
  for (const std::size_t k : {std::size_t{1}, std::size_t{7}, std::size_t{20}, prompt.size() - 1}) {
    // The prefix, made to sample the prompt's next token (logprobs are of the raw distribution).
    EngineRequest prefix = greedy("", 1);
    prefix.prompt.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(k));
    prefix.params.logprobs = 5;
    prefix.params.logit_bias = {{prompt[k], 100.0f}};
    const Collected c = collect(*engine.submit(prefix));
    ASSERT_EQ(c.logprobs.at(0).size(), 1u);
    const SampledToken& want = c.logprobs[0][0];
    const PromptTokenLogprob& got = whole.prompt_logprobs[k - 1];
    ASSERT_EQ(want.token, prompt[k]);
    EXPECT_EQ(got.token.token, prompt[k]) << k;
    EXPECT_EQ(got.token.logprob, want.logprob) << k;
    ASSERT_EQ(got.token.num_top, 5) << k;
    EXPECT_TRUE(std::equal(want.top.begin(), want.top.begin() + 5, got.token.top.begin())) << k;
    int rank = 1;
    for (int i = 0; i < 5; ++i)
      if (want.top[static_cast<std::size_t>(i)].logprob > *want.logprob) ++rank;
    if (rank <= 5) {
      EXPECT_EQ(got.rank, rank) << k;
    }
    EXPECT_GE(got.rank, 1);
  }
  // Again (its blocks are cached now, yet it is computed in full), in chunks
  // of 16, and three at once with other requests beside them.
  const Collected again = collect(*engine.submit(r));
  EXPECT_EQ(again.usage.cached_tokens, 0);
  Engine chunked(session_, config(16));
  const Collected small = collect(*chunked.submit(r));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) {
    streams.push_back(engine.submit(r));
    streams.push_back(engine.submit(greedy(prompts(8)[i], 8)));
  }
  for (const Collected* c : {&again, &small}) {
    ASSERT_EQ(c->prompt_logprobs.size(), whole.prompt_logprobs.size());
    for (std::size_t k = 0; k < whole.prompt_logprobs.size(); ++k)
      EXPECT_TRUE(same(c->prompt_logprobs[k], whole.prompt_logprobs[k])) << k;
  }
  for (std::size_t s = 0; s < streams.size(); s += 2) {
    const Collected c = collect(*streams[s]);
    collect(*streams[s + 1]);
    ASSERT_EQ(c.prompt_logprobs.size(), whole.prompt_logprobs.size());
    for (std::size_t k = 0; k < whole.prompt_logprobs.size(); ++k)
      EXPECT_TRUE(same(c.prompt_logprobs[k], whole.prompt_logprobs[k])) << "batched, " << k;
    EXPECT_EQ(c.tokens, whole.tokens);
  }
  expect_pool_free(engine);
}

TEST_F(EngineTest, AbortFreesBlocksWithinAStep) {
  Engine engine(session_, config());
  auto stream = engine.submit(greedy("Tell me a very long story about dragons.", 400));
  auto first = stream->next();
  ASSERT_TRUE(first.has_value());
  engine.abort(stream->id());
  Collected rest = collect(*stream);
  EXPECT_EQ(rest.finish.at(0), "abort");
  expect_pool_free(engine);
}

// The block map the web page draws: blocks in use while a request runs, and
// once it is done its full prompt blocks are cached hits, the rest free. The
// counts that come with a map are those of its moment, however stale it is.
TEST_F(EngineTest, BlockMapShowsBlocksInUseThenCached) {
  Engine engine(session_, config());
  EXPECT_EQ(engine.kv_block_map(), std::string(512, kBlockFree));
  auto stream = engine.submit(greedy(prompts(5)[4], 400));  // a prompt of several full blocks
  ASSERT_TRUE(stream->next().has_value());
  auto count = [](const std::string& map, char state) {
    return static_cast<int>(std::count(map.begin(), map.end(), state));
  };
  auto in_use = [&](const std::string& map) { return count(map, kBlockInUse) + count(map, kBlockShared); };
  for (int i = 0; i < 200 && in_use(engine.kv_block_map()) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int i = 0; i < 20; ++i) {
    KvUsage usage;
    const std::string map = engine.kv_block_map(&usage);
    EXPECT_GT(in_use(map), 0);
    EXPECT_EQ(in_use(map), usage.num_used_blocks);
    EXPECT_EQ(count(map, kBlockCached), usage.num_cached_free_blocks);
    std::this_thread::sleep_for(std::chrono::milliseconds(7));
  }
  engine.abort(stream->id());
  collect(*stream);
  expect_pool_free(engine);
  const std::string map = engine.kv_block_map();
  EXPECT_EQ(in_use(map), 0);
  EXPECT_EQ(count(map, kBlockCached), engine.stats().kv.num_cached_free_blocks);
  EXPECT_GT(engine.stats().kv.num_cached_free_blocks, 0);
}

// Input-grounded prompts (the output repeats the input) make n-gram lookup
// propose often; the others make it propose wrong tokens.
std::vector<std::string> speculation_prompts() {
  return {
      "Repeat exactly: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat,",
      "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return a + b\n\ndef",
      "Once upon a time",
      "1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2,",
  };
}

TEST_F(EngineTest, SpeculationNeverChangesAGreedyOutput) {
  const auto texts = speculation_prompts();
  std::vector<std::vector<TokenId>> want;
  for (const auto& t : texts) want.push_back(run_alone(config(), greedy(t, 24)));
  for (int k = 1; k <= 8; ++k) {
    EngineConfig c = config();
    c.speculative.method = SpeculativeConfig::Method::kNgram;
    c.speculative.adaptive = false;  // every step proposes: the mechanism under test
    c.speculative.num_tokens = k;
    Engine engine(session_, c);
    // Alone, one after the other (for a few k) ...
    if (k == 1 || k == 4 || k == 8) {
      for (std::size_t i = 0; i < texts.size(); ++i) {
        EXPECT_EQ(collect(*engine.submit(greedy(texts[i], 24))).tokens.at(0), want[i]) << "k " << k << " prompt " << i;
      }
    }
    // ... and all at once (every k).
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& t : texts) streams.push_back(engine.submit(greedy(t, 24)));
    for (std::size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(collect(*streams[i]).tokens.at(0), want[i]) << "batched, k " << k << " prompt " << i;
    const EngineStats st = engine.stats();
    EXPECT_GT(st.spec_proposed_tokens, 0);
    // (A dummy model's repetitive output may take every proposal, or none.)
    if (!dummy_) {
      EXPECT_GT(st.spec_accepted_tokens, 0);
      EXPECT_LT(st.spec_accepted_tokens, st.spec_proposed_tokens);  // some were rejected and rolled back
    }
    expect_pool_free(engine);
  }
}

// The adaptive policy changes how many tokens each step proposes, none
// included, from timings; whatever it chooses, the output is the model's own.
TEST_F(EngineTest, AdaptiveSpeculationNeverChangesAGreedyOutput) {
  const auto texts = speculation_prompts();
  std::vector<std::vector<TokenId>> want;
  for (const auto& t : texts) want.push_back(run_alone(config(), greedy(t, 24)));
  for (auto method : {SpeculativeConfig::Method::kNgram, SpeculativeConfig::Method::kDraft}) {
    EngineConfig c = config();
    c.speculative.method = method;
    c.speculative.draft_model_path = folio::testing::model_path(folio::testing::kSmolLM2);
    ASSERT_TRUE(c.speculative.adaptive);  // the default
    Engine engine(session_, c);
    for (std::size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(collect(*engine.submit(greedy(texts[i], 24))).tokens.at(0), want[i]) << "alone, prompt " << i;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& t : texts) streams.push_back(engine.submit(greedy(t, 24)));
    for (std::size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(collect(*streams[i]).tokens.at(0), want[i]) << "batched, prompt " << i;
    // Its first steps try every choice, so proposals were made and verified.
    EXPECT_GT(engine.stats().spec_proposed_tokens, 0);
    expect_pool_free(engine);
  }
}

TEST_F(EngineTest, SpeculationOnAQuantizedKvNeverChangesAGreedyOutput) {
  // Rejected drafts leave q8_0 rows behind that later tokens overwrite.
  const auto texts = speculation_prompts();
  EngineConfig plain = config();
  plain.kv_dtype = KvDType::kQ8_0;
  std::vector<std::vector<TokenId>> want;
  for (const auto& t : texts) want.push_back(run_alone(plain, greedy(t, 24)));
  EngineConfig c = plain;
  c.speculative.method = SpeculativeConfig::Method::kNgram;
  c.speculative.adaptive = false;  // every step proposes: the mechanism under test
  c.speculative.num_tokens = 4;
  Engine engine(session_, c);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& t : texts) streams.push_back(engine.submit(greedy(t, 24)));
  for (std::size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(collect(*streams[i]).tokens.at(0), want[i]) << i;
  if (!dummy_) {
    EXPECT_LT(engine.stats().spec_accepted_tokens, engine.stats().spec_proposed_tokens);
  }
  expect_pool_free(engine);
}

TEST_F(EngineTest, DraftModelSpeculationNeverChangesAGreedyOutput) {
  const auto texts = speculation_prompts();
  std::vector<std::vector<TokenId>> want;
  for (const auto& t : texts) want.push_back(run_alone(config(), greedy(t, 16)));
  for (int k : {1, 3, 8}) {
    EngineConfig c = config();
    c.speculative.method = SpeculativeConfig::Method::kDraft;
    c.speculative.adaptive = false;  // every step proposes: the mechanism under test
    c.speculative.num_tokens = k;
    // The model as its own draft: every mechanism runs (catch-up, batched
    // proposals, rollback of the draft's cache) and proposals are mostly right.
    c.speculative.draft_model_path = folio::testing::model_path(folio::testing::kSmolLM2);
    Engine engine(session_, c);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& t : texts) streams.push_back(engine.submit(greedy(t, 16)));
    for (std::size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(collect(*streams[i]).tokens.at(0), want[i]) << "k " << k << " prompt " << i;
    EXPECT_GT(engine.stats().spec_accepted_tokens, 0);
    expect_pool_free(engine);
  }
}

// The draft's cache holds the KV type the engine was given, not f16 always,
// and speculation over quantized caches still writes the target's tokens.
TEST_F(EngineTest, DraftModelKeepsTheEnginesKvCacheType) {
  const KvCacheDType q8(KvDType::kQ8_0);
  DraftModelProposer proposer(*session_, session_, 4, 256, q8);
  EXPECT_EQ(proposer.kv_dtype(), q8);
  const auto texts = speculation_prompts();
  EngineConfig plain = config();
  plain.kv_dtype = q8;
  EngineConfig c = plain;
  c.speculative.method = SpeculativeConfig::Method::kDraft;
  c.speculative.adaptive = false;  // every step proposes: the mechanism under test
  c.speculative.num_tokens = 4;
  c.speculative.draft_model_path = folio::testing::model_path(folio::testing::kSmolLM2);
  Engine engine(session_, c);
  for (const auto& t : texts)
    EXPECT_EQ(collect(*engine.submit(greedy(t, 16))).tokens.at(0), run_alone(plain, greedy(t, 16)));
  EXPECT_GT(engine.stats().spec_accepted_tokens, 0);
}

TEST_F(EngineTest, DraftModelWithAnotherVocabularyIsRefused) {
  FOLIO_REQUIRE_MODEL(qwen, folio::testing::kQwen05B);
  EngineConfig c = config();
  c.speculative.method = SpeculativeConfig::Method::kDraft;
  c.speculative.adaptive = false;  // every step proposes: the mechanism under test
  c.speculative.draft_model_path = qwen;
  try {
    Engine engine(session_, c);
    FAIL() << "a Qwen draft for SmolLM2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
}

TEST_F(EngineTest, InvalidRequestsAreRefusedWithReasons) {
  Engine engine(session_, config());
  EngineRequest empty;
  EXPECT_THROW(engine.submit(empty), EngineError);
  EngineRequest too_long = greedy("x", 1);
  too_long.prompt.assign(600, 42);
  try {
    engine.submit(too_long);
    FAIL() << "a 600-token prompt fits a 512-token context";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.kind(), EngineError::Kind::kInvalid);
    EXPECT_NE(std::string(e.what()).find("600"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos);
  }
  EngineRequest bad_token = greedy("x", 1);
  bad_token.prompt.push_back(1 << 30);
  EXPECT_THROW(engine.submit(bad_token), EngineError);
}

}  // namespace
}  // namespace folio

namespace folio {
namespace {

// A reasoning budget: once max_tokens thinking tokens are out, the close
// tokens come in place of the sampled ones, whichever path chose them (each
// of n completions, the forks' first token included), and what the model
// writes after them is its own answer to the forced text. Such a request
// does not speculate, so speculation on changes nothing and proposes nothing.
TEST_F(EngineTest, AReasoningBudgetForcesItsCloseInPlaceOfTheSampledTokens) {
  // A prompt the n-gram proposer finds proposals in, so that "proposes nothing" says something.
  const std::string kCount = "1 2 3 4 5 6 1 2 3 4 5 6 1 2 3 4 5 6 1 2";
  const std::vector<TokenId> close =
      session_->tokenizer->encode(" Zebra crossing", false, false);  // not what it writes
  ASSERT_GE(close.size(), 2u);
  EngineRequest free_run = greedy(kCount, 12);
  const std::vector<TokenId> want = run_alone(config(), free_run);
  for (const int budget : {0, 3}) {
    EngineRequest r = greedy(kCount, 12);
    r.params.n = 2;
    r.params.reasoning_budget.max_tokens = budget;
    r.params.reasoning_budget.open = {};  // nothing opens thinking again: the prompt opened it
    r.params.reasoning_budget.close = close;
    r.params.reasoning_budget.starts_inside = true;
    // What the model writes after the forced text, as a prompt of its own.
    std::vector<TokenId> forced_prompt = r.prompt;
    forced_prompt.insert(forced_prompt.end(), want.begin(), want.begin() + budget);
    forced_prompt.insert(forced_prompt.end(), close.begin(), close.end());
    EngineRequest after = greedy("", 12 - budget - static_cast<int>(close.size()));
    after.prompt = forced_prompt;
    std::vector<TokenId> expected(want.begin(), want.begin() + budget);
    expected.insert(expected.end(), close.begin(), close.end());
    const std::vector<TokenId> rest = run_alone(config(), after);
    expected.insert(expected.end(), rest.begin(), rest.end());

    EngineConfig spec = config();
    spec.speculative.method = SpeculativeConfig::Method::kNgram;
    spec.speculative.adaptive = false;
    spec.speculative.num_tokens = 4;
    for (const EngineConfig& c : {config(), spec}) {
      Engine engine(session_, c);
      Collected got = collect(*engine.submit(r));
      ASSERT_EQ(got.tokens.size(), 2u);
      for (int i = 0; i < 2; ++i) EXPECT_EQ(got.tokens[i], expected) << "budget " << budget << " completion " << i;
      EXPECT_EQ(engine.stats().spec_proposed_tokens, 0);
      if (c.speculative.method == SpeculativeConfig::Method::kNgram) {
        EXPECT_EQ(collect(*engine.submit(free_run)).tokens.at(0), want);
        EXPECT_GT(engine.stats().spec_proposed_tokens, 0);  // without a budget it speculates
      }
      expect_pool_free(engine);
    }
  }
}

}  // namespace
}  // namespace folio
