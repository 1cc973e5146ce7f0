// Qwen3.5, the hybrid of gated DeltaNet and gated attention (issue 42), on
// its tiny random-weight checkpoint (tests/data/tiny/qwen3_5,
// scripts/make_family_models.py). Its logits against transformers and
// llama.cpp are family_model_test.cc's; here: the reference backend (the
// oracle) and the CPU backend agree; the state carried across prefill chunks
// and decode steps gives the bits of one prefill (==); the engine's greedy
// outputs are the same alone, batched, at every chunk size and under
// preemption (==); the state cache is counted in the budget; and what a
// recurrent state does not support yet is refused with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/backend_factory.h"
#include "core/error.h"
#include "engine/engine.h"
#include "kv/kv_storage.h"
#include "kv/state_storage.h"
#include "model/model_loader.h"
#include "support/engine_invariance.h"
#include "support/greedy_runner.h"
#include "support/test_backend.h"
#include "support/test_models.h"

namespace folio {
namespace {

using folio::testing::GreedyRunner;

std::string tiny_dir() { return folio::testing::source_path("tests/data/tiny/qwen3_5"); }

// Two sequences of 200 and 150 tokens (the references' long ones).
std::vector<std::vector<TokenId>> probe_sequences() {
  std::vector<std::vector<TokenId>> out(2);
  for (int i = 1; i <= 200; ++i) out[0].push_back(static_cast<TokenId>((i * 37) % 384));
  for (int i = 1; i <= 150; ++i) out[1].push_back(static_cast<TokenId>((7 + i * 41) % 384));
  return out;
}

// The recurrent state carried from chunk to chunk (1, 7 and 64 tokens) and
// decode step to decode step gives the logits of one whole prefill, bit for
// bit: the delta rule runs token by token whatever the chunk.
TEST(Qwen35, ChunkedPrefillGivesTheBitsOfOnePrefill) {
  const auto backend = folio::testing::make_test_backend(2, "f32");
  for (const char* file : {"", "/model.gguf"}) {
    LoadedModel model = load_model(tiny_dir() + file, *backend);
    GreedyRunner runner(*backend, model, 256, 2);
    for (const std::vector<TokenId>& ids : probe_sequences()) {
      const std::vector<float> whole = runner.teacher_forced(ids);
      for (std::int64_t chunk : {1, 7, 64})
        EXPECT_EQ(runner.teacher_forced(ids, chunk), whole) << file << " chunks of " << chunk;
    }
  }
}

// The CPU backend against the reference (the oracle), f32 both: the linear
// layers run the reference's loops on the CPU, the rest its own kernels.
TEST(Qwen35, CpuBackendAgreesWithTheReference) {
  BackendOptions ref_options;
  ref_options.name = "reference";
  const auto reference = make_backend(ref_options);
  BackendOptions cpu_options;
  cpu_options.precision = "f32";
  cpu_options.num_threads = 2;
  const auto cpu = make_backend(cpu_options);
  LoadedModel ref_model = load_model(tiny_dir(), *reference);
  LoadedModel cpu_model = load_model(tiny_dir(), *cpu);
  GreedyRunner ref_runner(*reference, ref_model, 256, 1);
  GreedyRunner cpu_runner(*cpu, cpu_model, 256, 1);
  double worst = 0, scale = 0;
  int argmax_differs = 0;
  for (const std::vector<TokenId>& ids : probe_sequences()) {
    const std::vector<float> want = ref_runner.teacher_forced(ids, 16);
    const std::vector<float> got = cpu_runner.teacher_forced(ids, 16);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
      scale = std::max(scale, static_cast<double>(std::abs(want[i])));
    }
    const std::size_t V = static_cast<std::size_t>(ref_model.config.vocab_size);
    for (std::size_t p = 0; p < ids.size(); ++p) {
      const auto a = std::max_element(got.begin() + p * V, got.begin() + (p + 1) * V) - got.begin();
      const auto b = std::max_element(want.begin() + p * V, want.begin() + (p + 1) * V) - want.begin();
      argmax_differs += a != b ? 1 : 0;
    }
  }
  std::printf("[qwen3_5] cpu vs reference: max |logit diff| %.2e of logits up to %.2f, argmax differs at %d\n",
              worst, scale, argmax_differs);
  EXPECT_LE(worst, 1e-4 * std::max(1.0, scale));
  EXPECT_EQ(argmax_differs, 0);
}

// Eight prompts of 20 to 111 tokens, 24 greedy tokens each: alone, batched,
// in chunks of 1, 7 and 16, and preempted (14 blocks of 16 cannot hold
// them all) - the same tokens, from both formats.
class Qwen35EngineTest : public ::testing::TestWithParam<const char*> {};

TEST_P(Qwen35EngineTest, BatchingChunkingAndPreemptionChangeNoGreedyOutput) {
  ModelSessionOptions o;
  o.backend = folio::testing::test_backend_options(2);
  o.model_path = tiny_dir() + GetParam();
  folio::testing::InvarianceCase c;
  c.max_model_len = 256;
  c.num_prompts = 8;
  c.first_prompt_len = 20;
  c.prompt_len_step = 13;
  c.prefix_hits = false;  // prefix caching is off for a model with a recurrent state
  folio::testing::expect_engine_invariance(open_model_session(o), c);
}

INSTANTIATE_TEST_SUITE_P(Tiny, Qwen35EngineTest, ::testing::Values("", "/model.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param[0] == '\0' ? "hf" : "gguf");
                         });

std::shared_ptr<ModelSession> open_session() {
  ModelSessionOptions o;
  o.backend = folio::testing::test_backend_options(2);
  o.model_path = tiny_dir();
  return open_model_session(o);
}

// The state cache holds one slot per running sequence, its bytes taken from
// the KV budget: the pools together stay within it, and they do not depend
// on the context length.
TEST(Qwen35, StateCacheIsCountedInTheBudget) {
  const auto session = open_session();
  const ModelConfig& m = session->config();
  // Per sequence: 6 linear layers x (3 x 64 window + 2 x 16 x 16 matrix) f32.
  EXPECT_EQ(m.recurrent_state_bytes_per_seq(), 6u * (3 * 64 + 2 * 16 * 16) * 4);
  // K/V only for the 2 attention layers: a block of 16 tokens, one KV head of
  // 32 numbers in f16, K and V.
  EXPECT_EQ(KvStorage::block_bytes(m, 16, KvCacheDType{}), 2u * 16 * (32 + 32) * 2);
  EXPECT_EQ(m.kv_bytes_per_token(2), 2 * (32 + 32) * 2);
  EngineConfig e;
  e.max_model_len = 256;
  e.max_num_seqs = 8;
  e.kv_cache_bytes = 1 << 20;
  Engine engine(session, e);
  const EngineStats st = engine.stats();
  EXPECT_EQ(st.state_slots, 8);
  EXPECT_EQ(st.state_bytes, StateStorage::bytes_for(m, 8));
  EXPECT_GE(st.state_bytes, 8 * m.recurrent_state_bytes_per_seq());
  EXPECT_LE(st.kv_bytes + st.state_bytes, e.kv_cache_bytes);
  EngineConfig longer = e;
  longer.max_model_len = 512;
  EXPECT_EQ(Engine(session, longer).stats().state_bytes, st.state_bytes);
  // A budget the state alone fills is refused with the way out.
  EngineConfig tiny = e;
  tiny.kv_cache_bytes = st.state_bytes;
  try {
    Engine refused(session, tiny);
    ADD_FAILURE() << "started";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("--max-num-seqs"), std::string::npos) << err.what();
  }
}

// What a recurrent state does not support yet: speculative decoding is
// refused at start-up, n > 1 at request time, each saying why; prefix
// caching is turned off (a second identical prompt hits no cached token).
TEST(Qwen35, UnsupportedFeaturesAreRefusedWithTheReason) {
  const auto session = open_session();
  EngineConfig spec;
  spec.max_model_len = 256;
  spec.speculative.method = SpeculativeConfig::Method::kNgram;
  try {
    Engine refused(session, spec);
    ADD_FAILURE() << "started with speculative decoding";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("roll that state back"), std::string::npos) << err.what();
  }

  EngineConfig e;
  e.max_model_len = 256;
  e.enable_prefix_caching = true;
  Engine engine(session, e);
  EngineRequest forked = folio::testing::greedy_request({5, 6, 7}, 4);
  forked.params.n = 2;
  forked.params.temperature = 1.0f;
  try {
    engine.submit(forked);
    ADD_FAILURE() << "n = 2 accepted";
  } catch (const EngineError& err) {
    EXPECT_EQ(err.kind(), EngineError::Kind::kInvalid);
    EXPECT_NE(std::string(err.what()).find("cannot fork"), std::string::npos) << err.what();
  }
  std::vector<TokenId> prompt;
  for (int i = 0; i < 48; ++i) prompt.push_back(static_cast<TokenId>((11 + 29 * i) % 384));
  const auto first = folio::testing::stream_tokens(*engine.submit(folio::testing::greedy_request(prompt, 4)));
  Usage usage;
  const auto second =
      folio::testing::stream_tokens(*engine.submit(folio::testing::greedy_request(prompt, 4)), &usage);
  EXPECT_EQ(second, first);
  EXPECT_EQ(usage.cached_tokens, 0);
}

}  // namespace
}  // namespace folio
