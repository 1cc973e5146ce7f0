// Encoder speed: quantize_row and quantize_row_weighted on a 64 x 4096 matrix
// of Gaussian weights (1 MiB of float input), one core. Run on an idle machine:
//   build/bench/quantize_bench
// bytes_per_second counts the float input, so 135M weights are 540 MB.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/quantize.h"

namespace folio {
namespace {

constexpr std::int64_t kRows = 64;
constexpr std::int64_t kCols = 4096;

const DType kTypes[] = {DType::F16,  DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                        DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

void BM_Quantize(benchmark::State& state) {
  const DType type = kTypes[state.range(0)];
  const bool weighted = state.range(1) != 0;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(kRows * kCols));
  for (auto& v : x) v = normal(rng);
  // [kCols] mean squared activations: a few channels far above the rest.
  std::vector<float> importance(static_cast<std::size_t>(kCols));
  for (auto& v : importance) v = normal(rng) * normal(rng) * (rng() % 50 == 0 ? 100.0f : 1.0f);
  for (auto& v : importance) v *= v;
  std::vector<char> out(static_cast<std::size_t>(row_bytes(type, kCols) * kRows));
  for (auto _ : state) {
    for (std::int64_t r = 0; r < kRows; ++r)
      quantize_row_weighted(type, x.data() + r * kCols, weighted ? importance.data() : nullptr,
                            out.data() + r * row_bytes(type, kCols), kCols);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * static_cast<std::int64_t>(sizeof(float)));
  state.SetLabel(std::string(name(type)) + (weighted ? " weighted" : ""));
}
BENCHMARK(BM_Quantize)->ArgsProduct({benchmark::CreateDenseRange(0, 10, 1), {0, 1}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace folio

BENCHMARK_MAIN();
