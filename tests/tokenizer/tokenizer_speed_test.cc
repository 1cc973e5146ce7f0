// Load and encode speed on the real models, in CPU time (the wall clock of a
// shared machine says little). The bounds are loose, to catch a regression of
// several times, not to benchmark; the measured times are printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <string>

#include "model/gguf_file.h"
#include "support/test_models.h"
#include "tokenizer/tokenizer.h"

namespace folio {
namespace {

double cpu_ms(std::clock_t from) { return (std::clock() - from) * 1000.0 / CLOCKS_PER_SEC; }

// About 1 MB of mixed text: prose, code, digits, CJK, emoji.
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

class TokenizerSpeedTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerSpeedTest, LoadsAndEncodesQuickly) {
  FOLIO_REQUIRE_MODEL(path, GetParam());
  std::clock_t start = std::clock();
  GgufFile file = GgufFile::open(path);
  auto tokenizer = Tokenizer::create(Vocab::from_gguf(file));
  const double load_ms = cpu_ms(start);

  const std::string text = mixed_text();
  start = std::clock();
  const auto ids = tokenizer->encode(text, true, false);
  const double encode_ms = cpu_ms(start);
  std::printf("[ speed    ] %s: %lld tokens loaded in %.0f ms; %zu bytes -> %zu tokens in %.0f ms (%.1f MB/s)\n",
              GetParam(), static_cast<long long>(tokenizer->vocab().size()), load_ms, text.size(), ids.size(),
              encode_ms, text.size() / 1e3 / encode_ms);
  EXPECT_LT(load_ms, 1000);
  EXPECT_LT(encode_ms, 2000);
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizerSpeedTest,
                         ::testing::Values(testing::kSmolLM2, testing::kQwen05B, testing::kGemma3));

}  // namespace
}  // namespace folio
