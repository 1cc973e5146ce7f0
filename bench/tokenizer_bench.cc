// Tokenizer speed on the real models: vocab load (GGUF metadata -> Tokenizer)
// and encoding about 1 MB of mixed text. Run on an idle machine:
//   build/bench/tokenizer_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "model/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace folio {
namespace {

std::string model_path(const char* file) {
  const char* env = std::getenv("FOLIO_MODELS");
  const char* home = std::getenv("HOME");
  return (env ? std::string(env) : std::string(home ? home : ".") + "/.cache/folio/models") + "/" + file;
}

// About 1 MB of prose, code, digits, CJK and emoji.
std::string mixed_text() {
  const std::string block =
      "The quick brown fox jumps over the lazy dog; it's 12:45 and we'll see.\n"
      "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n"
      "for (int i = 0; i < 1024; ++i) { sum += a[i] * b[i]; }  // 3.14159\n"
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80\xF0\x9F\x91\x8D "
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 SELECT * FROM t WHERE id = 42;\n\t\t\n";
  std::string text;
  for (int i = 0; text.size() < (1 << 20); ++i) text += block + std::to_string(i * 7919) + " ";
  return text;
}

const char* const kModels[] = {"smollm2-135m-instruct-q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                               "gemma-3-270m-q4_k_m.gguf"};

void BM_LoadVocab(benchmark::State& state) {
  const std::string path = model_path(kModels[state.range(0)]);
  GgufFile file = GgufFile::open(path);
  for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::create(Vocab::from_gguf(file)));
  state.SetLabel(kModels[state.range(0)]);
}
BENCHMARK(BM_LoadVocab)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

void BM_Encode1MB(benchmark::State& state) {
  GgufFile file = GgufFile::open(model_path(kModels[state.range(0)]));
  auto tokenizer = Tokenizer::create(Vocab::from_gguf(file));
  const std::string text = mixed_text();
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer->encode(text, true, false));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.SetLabel(kModels[state.range(0)]);
}
BENCHMARK(BM_Encode1MB)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace folio

BENCHMARK_MAIN();
