// Sampling on the device (Backend::sample) against the host reference path
// (EngineConfig::host_sampling: logits to the host, the host Sampler and
// verify_draft): the same tokens and logprobs bit for bit for greedy and
// seeded requests under every filter and penalty, min_tokens, n > 1, with n-gram and
// draft-model speculation; padded step shapes change nothing; and in a step
// only the sampled token ids (and the logprobs asked for) cross to the host.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "backend/sealed/sealed_backend.h"
#include "engine/engine.h"
#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

struct Outcome {
  std::vector<std::vector<TokenId>> tokens;       // per completion
  std::vector<std::vector<SampledToken>> logprobs;  // per completion, when asked for
};

Outcome collect(RequestStream& stream) {
  Outcome o;
  while (auto out = stream.next()) {
    EXPECT_EQ(out->error, "");
    for (auto& d : out->deltas) {
      if (o.tokens.size() <= static_cast<std::size_t>(d.index)) {
        o.tokens.resize(d.index + 1);
        o.logprobs.resize(d.index + 1);
      }
      o.tokens[d.index].insert(o.tokens[d.index].end(), d.token_ids.begin(), d.token_ids.end());
      o.logprobs[d.index].insert(o.logprobs[d.index].end(), d.logprobs.begin(), d.logprobs.end());
    }
    if (out->finished) break;
  }
  return o;
}

// Two outcomes are the same when every token is, and every logprob bit.
std::string differences(const Outcome& a, const Outcome& b) {
  if (a.tokens != b.tokens) return "tokens differ";
  for (std::size_t c = 0; c < a.logprobs.size(); ++c) {
    if (a.logprobs[c].size() != b.logprobs[c].size()) return "logprob counts differ";
    for (std::size_t i = 0; i < a.logprobs[c].size(); ++i) {
      const SampledToken &x = a.logprobs[c][i], &y = b.logprobs[c][i];
      if (x.token != y.token || x.logprob.has_value() != y.logprob.has_value() ||
          (x.logprob && std::memcmp(&*x.logprob, &*y.logprob, sizeof(float)) != 0) || x.num_top != y.num_top ||
          !std::equal(x.top.begin(), x.top.begin() + x.num_top, y.top.begin()))
        return "logprobs of completion " + std::to_string(c) + " token " + std::to_string(i) + " differ";
    }
  }
  return {};
}

class DeviceSamplingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    session_ = folio::testing::open_test_session(folio::testing::kSmolLM2);
  }
  static void TearDownTestSuite() { session_.reset(); }
  void SetUp() override {
    if (!session_) {
      FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
    }
  }

  static EngineConfig config() {
    EngineConfig c;
    c.max_num_batched_tokens = 256;
    c.max_num_seqs = 32;
    c.max_model_len = 512;
    c.kv_num_blocks = 512;
    return c;
  }

  // The requests every comparison runs: greedy and seeded, under each
  // filter and penalty, with logprobs, one with n = 3.
  static std::vector<EngineRequest> requests() {
    const char* texts[] = {"The capital of France is", "Once upon a time", "def add(a, b):\n    return",
                           "A list of fruits: apple, banana,", "1 2 3 4 5 6", "Water boils at",
                           "Repeat after me: the cat sat on the mat. the cat sat on the mat. the cat"};
    std::vector<EngineRequest> out;
    for (int i = 0; i < 14; ++i) {
      EngineRequest r;
      r.prompt = session_->tokenizer->encode(texts[i % 7], true, false);
      SamplingParams& p = r.params;
      p.max_tokens = 20;
      p.ignore_eos = true;
      p.seed = 100 + i;
      switch (i % 7) {
        case 0: p.temperature = 0; break;
        case 1: p.temperature = 0.9f; p.top_p = 0.8f; break;
        case 2: p.temperature = 1.2f; p.top_k = 30; p.min_p = 0.02f; break;
        case 3: p.temperature = 0.7f; p.repetition_penalty = 1.2f; p.frequency_penalty = 0.5f; p.presence_penalty = 0.3f; break;
        case 4: p.temperature = 1.0f; p.top_k = 700; p.top_p = 0.95f; p.logit_bias = {{13, -5.0f}, {28, 3.0f}}; break;
        case 5: p.temperature = 0; p.repetition_penalty = 1.3f; break;
        case 6: p.temperature = 0.8f; p.n = 3; break;
      }
      if (i % 2 == 1) p.logprobs = 1 + i % 5;
      out.push_back(r);
    }
    // min_tokens against an end-of-generation token a bias forces: held back
    // (-inf) on every row before it, greedy and sampled, with the bias merged.
    const TokenId eog = session_->tokenizer->vocab().end_of_generation_ids.at(0);
    for (int i = 0; i < 2; ++i) {
      EngineRequest r;
      r.prompt = session_->tokenizer->encode(texts[i], true, false);
      r.params.max_tokens = 20;
      r.params.seed = 300 + i;
      r.params.temperature = i == 0 ? 0.0f : 0.9f;
      r.params.min_tokens = 6 + i;
      r.params.logit_bias = {{eog, 30.0f}};
      r.params.logprobs = 2;
      out.push_back(r);
    }
    return out;
  }

  // Every request at once on an engine of this config.
  static std::vector<Outcome> run(const EngineConfig& c) {
    Engine engine(session_, c);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const EngineRequest& r : requests()) streams.push_back(engine.submit(r));
    std::vector<Outcome> out;
    for (auto& s : streams) out.push_back(collect(*s));
    return out;
  }

  static void expect_same(const std::vector<Outcome>& got, const std::vector<Outcome>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(differences(got[i], want[i]), "") << what << ", request " << i;
  }

  static std::shared_ptr<ModelSession> session_;
};

std::shared_ptr<ModelSession> DeviceSamplingTest::session_;

TEST_F(DeviceSamplingTest, GivesTheHostSamplersTokensAndLogprobs) {
  EngineConfig host = config();
  host.host_sampling = true;
  expect_same(run(config()), run(host), "no speculation");
}

TEST_F(DeviceSamplingTest, GivesTheHostVerifiersTokensWithNgramSpeculation) {
  EngineConfig device = config();
  device.speculative.method = SpeculativeConfig::Method::kNgram;
  device.speculative.adaptive = false;  // every step proposes: the mechanism under test
  device.speculative.num_tokens = 4;
  EngineConfig host = device;
  host.host_sampling = true;
  expect_same(run(device), run(host), "n-gram speculation");
}

TEST_F(DeviceSamplingTest, GivesTheHostVerifiersTokensWithADraftModel) {
  EngineConfig device = config();
  device.speculative.method = SpeculativeConfig::Method::kDraft;
  device.speculative.adaptive = false;  // every step proposes: the mechanism under test
  device.speculative.num_tokens = 3;
  device.speculative.draft_model_path = folio::testing::model_path(folio::testing::kSmolLM2);
  EngineConfig host = device;
  host.host_sampling = true;
  expect_same(run(device), run(host), "draft-model speculation");
}

// Token counts rounded up to the buckets a CUDA graph would replay: the
// padding tokens write no cache slot and change no output.
TEST_F(DeviceSamplingTest, PaddedStepsChangeNothing) {
  EngineConfig padded = config();
  padded.pad_to_buckets = true;
  padded.max_num_batched_tokens = 100;  // chunked prefills of odd sizes
  EngineConfig plain = padded;
  plain.pad_to_buckets = false;
  expect_same(run(padded), run(plain), "padded steps");
  padded.speculative.method = SpeculativeConfig::Method::kNgram;
  padded.speculative.adaptive = false;  // every step proposes: the mechanism under test
  plain.speculative.method = SpeculativeConfig::Method::kNgram;
  plain.speculative.adaptive = false;  // every step proposes: the mechanism under test
  expect_same(run(padded), run(plain), "padded steps with speculation");
}

// The sealed backend counts what crosses: a step sends back, in one copy, 8
// bytes per sampled row (its token and whether a draft stood) and a
// LogprobResult per row that asked, never a row of logits.
TEST(DeviceSampling, OnlyTokenIdsAndAskedLogprobsCrossToTheHost) {
  FOLIO_REQUIRE_MODEL(path, folio::testing::kSmolLM2);
  ModelSessionOptions o;
  o.model_path = path;
  o.backend.name = "sealed";
  o.backend.num_threads = 2;
  auto session = open_model_session(o);
  const auto& sealed = dynamic_cast<const SealedBackend&>(*session->backend);
  EngineConfig c;
  c.max_num_batched_tokens = 64;  // prefills in chunks: some steps sample nothing
  c.max_model_len = 256;
  c.kv_num_blocks = 128;
  for (const bool logprobs : {false, true}) {
    Engine engine(session, c);
    const CrossingCounts before = sealed.crossings();
    std::vector<std::shared_ptr<RequestStream>> streams;
    int generated = 0;
    for (int i = 0; i < 6; ++i) {
      EngineRequest r;
      r.prompt = session->tokenizer->encode("Tell me about the number " + std::to_string(i) + " and why it matters", true, false);
      r.params.temperature = i % 2 == 0 ? 0.0f : 0.8f;
      r.params.seed = i;
      r.params.max_tokens = 10 + i;
      r.params.ignore_eos = true;
      if (logprobs) r.params.logprobs = 5;
      generated += 10 + i;
      streams.push_back(engine.submit(r));
    }
    for (auto& s : streams) collect(*s);
    const CrossingCounts after = sealed.crossings();
    const std::uint64_t per_token = sizeof(SampleResult) + (logprobs ? sizeof(LogprobResult) : 0);
    EXPECT_EQ(after.to_host_bytes - before.to_host_bytes, static_cast<std::uint64_t>(generated) * per_token)
        << "logprobs " << logprobs;
    // One copy per sampling step, logprobs or not; steps that only prefill copy nothing back.
    const std::uint64_t copies = after.to_host_copies - before.to_host_copies;
    const auto steps = static_cast<std::uint64_t>(engine.stats().num_steps);
    EXPECT_LE(copies, steps);
    EXPECT_GE(copies, static_cast<std::uint64_t>(generated / 6));
  }
}

}  // namespace
}  // namespace folio
