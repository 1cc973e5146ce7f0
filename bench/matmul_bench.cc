// Matmul throughput of the CPU backend on the shapes of our models. Batch 1
// (decode) is memory-bound: it reports GB/s of weights streamed, to compare
// with StreamRead, this machine's bandwidth for a plain streaming read. Batch
// 32 and 512 (batched decode, prefill) are compute-bound: they report GOP/s,
// counting a multiply-add as two operations.
//
//   build/bench/matmul_bench                         all of it, on every core
//   build/bench/matmul_bench --benchmark_filter=q8   one precision
//   build/bench/matmul_bench --threads=1             one core, timed in CPU time
//                                                    (steadier on a busy machine)
//   build/bench/matmul_bench --no-pack               weights in the file's layout,
//                                                    not packed as a model load does
//   build/bench/matmul_bench --level=avx2            kernels of a lower SIMD level
//                                                    (avx512, avx2, scalar)
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/buffer.h"
#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"
#include "tensor/half.h"

namespace folio {
namespace {

int g_threads = 0;       // --threads; 0: one per core
bool g_no_pack = false;  // --no-pack: weights in the file's layout
std::string g_level;     // --level: the highest SIMD level the kernels may use

int bench_threads() { return g_threads > 0 ? g_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// ---- the machine's streaming-read bandwidth ----

__attribute__((target("avx2"))) std::int64_t sum_bytes(const std::byte* p, std::size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (std::size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) std::int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

void StreamRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const std::size_t bytes = std::size_t{1} << 30;  // far beyond every cache
  Buffer buffer = host_buffer(bytes);
  std::memset(buffer.data(), 1, bytes);
  ThreadPool pool(threads);
  std::vector<std::int64_t> sums(static_cast<std::size_t>(threads));
  for (auto _ : state) {
    pool.run_chunks(threads, [&](std::int64_t c, int) {
      const std::size_t begin = bytes * c / threads / 128 * 128, end = bytes * (c + 1) / threads / 128 * 128;
      sums[c] = sum_bytes(static_cast<const std::byte*>(buffer.data()) + begin, end - begin);
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * 1e-9 * static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate);
}

// ---- matmul ----

struct Shape {
  const char* name;
  DType type;
  std::int64_t rows;  // output features
  std::int64_t cols;  // input features
  bool prefill;       // also run at batch 512
};

const Shape kShapes[] = {
    {"smollm2/attn_q", DType::Q4_1, 576, 576, true},
    {"smollm2/ffn_up", DType::Q4_1, 1536, 576, true},
    {"smollm2/ffn_down", DType::Q4_1, 576, 1536, true},
    {"smollm2/output", DType::Q8_0, 49152, 576, false},
    {"qwen2.5-0.5b/attn_q", DType::Q5_0, 896, 896, true},
    {"qwen2.5-0.5b/ffn_up", DType::Q5_0, 4864, 896, true},
    {"qwen2.5-0.5b/ffn_up", DType::Q8_0, 4864, 896, true},
    {"qwen2.5-0.5b/ffn_up", DType::Q4_0, 4864, 896, true},
    {"qwen2.5-0.5b/ffn_up", DType::IQ4_NL, 4864, 896, true},
    {"qwen2.5-0.5b/ffn_up", DType::MXFP4, 4864, 896, true},
    {"qwen2.5-0.5b/ffn_up", DType::NVFP4, 4864, 896, true},
    {"qwen2.5-0.5b/ffn_down", DType::Q6_K, 896, 4864, true},
    {"qwen2.5-0.5b/ffn_down", DType::Q4_K, 896, 4864, true},
    {"qwen2.5-0.5b/ffn_down", DType::IQ4_XS, 896, 4864, true},
    {"qwen2.5-0.5b/output", DType::Q8_0, 151936, 896, false},
    {"qwen2.5-0.5b/ffn_up", DType::F16, 4864, 896, false},
    {"qwen2.5-1.5b/attn_q", DType::Q4_K, 1536, 1536, true},
    {"qwen2.5-1.5b/ffn_up", DType::Q4_K, 8960, 1536, true},
    {"qwen2.5-1.5b/ffn_down", DType::Q6_K, 1536, 8960, true},
    {"qwen2.5-1.5b/ffn_down", DType::Q5_K, 1536, 8960, true},
    {"qwen2.5-1.5b/output", DType::Q6_K, 151936, 1536, false},
};

// Random blocks with finite binary16 scales (values do not change the speed).
void fill_weights(DType type, std::byte* dst, std::size_t bytes) {
  std::mt19937 rng(7);
  for (std::size_t i = 0; i < bytes; i += 4) {
    const std::uint32_t r = rng();
    std::memcpy(dst + i, &r, std::min<std::size_t>(4, bytes - i));
  }
  const auto& ti = info(type);
  std::vector<int> halves;  // offsets of binary16 scale fields in a block
  switch (type) {
    case DType::F16: halves = {0}; break;
    case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: halves = {0}; break;
    case DType::IQ4_NL: case DType::IQ4_XS: halves = {0}; break;
    case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: halves = {0, 2}; break;
    case DType::Q2_K: halves = {80, 82}; break;
    case DType::Q3_K: halves = {108}; break;
    case DType::Q6_K: halves = {208}; break;
    default: break;
  }
  const std::uint16_t h = f32_to_f16(0.01f);
  for (std::size_t b = 0; b + static_cast<std::size_t>(ti.block_bytes) <= bytes;
       b += static_cast<std::size_t>(ti.block_bytes))
    for (int off : halves) std::memcpy(dst + b + off, &h, sizeof(h));
  // The FP4 types' 8-bit scales: normal values (subnormal products may be slower).
  for (std::size_t b = 0; b + static_cast<std::size_t>(ti.block_bytes) <= bytes;
       b += static_cast<std::size_t>(ti.block_bytes)) {
    if (type == DType::MXFP4) dst[b] = std::byte{120};
    if (type == DType::NVFP4) std::memset(dst + b, 0x30, 4);
  }
}

void Matmul(benchmark::State& state, Shape shape, MatmulPrecision precision) {
  const std::int64_t n = state.range(0);
  const std::int64_t m = shape.rows, k = shape.cols;
  const std::size_t w_bytes = static_cast<std::size_t>(row_bytes(shape.type, k) * m);
  // At decode batches (speculative verification included), cycle through
  // enough copies of the matrix to miss every cache, as a forward pass does
  // over its layers.
  const std::size_t copies = n <= 8 ? std::max<std::size_t>(1, (std::size_t{256} << 20) / w_bytes) : 1;
  Buffer weights = host_buffer(w_bytes * copies);
  fill_weights(shape.type, static_cast<std::byte*>(weights.data()), w_bytes * copies);
  std::vector<float> x(static_cast<std::size_t>(n * k)), y(static_cast<std::size_t>(n * m));
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto& v : x) v = unit(rng);
  CpuBackend cpu(bench_threads(), g_level, precision);
  Tensor xt(x.data(), DType::F32, {n, k});
  Tensor yt(y.data(), DType::F32, {n, m});
  // Each copy as a model load leaves it: packed by the backend, unless --no-pack.
  std::vector<Tensor> ws;
  std::vector<Buffer> packed;
  for (std::size_t c = 0; c < copies; ++c) {
    ws.push_back(Tensor(static_cast<std::byte*>(weights.data()) + c * w_bytes, shape.type, {m, k}));
    if (!g_no_pack) packed.push_back(cpu.load_weight(ws.back()));
  }
  std::size_t copy = 0;
  for (auto _ : state) {
    cpu.matmul(ws[copy], xt, yt, nullptr);
    benchmark::DoNotOptimize(y.data());
    copy = (copy + 1) % copies;
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w_bytes) * 1e-9 * iters, benchmark::Counter::kIsRate);
  state.counters["GOP/s"] =
      benchmark::Counter(2e-9 * static_cast<double>(m * k * n) * iters, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(name(shape.type)) + " " + std::to_string(m) + "x" + std::to_string(k) + " " +
                 cpu.features().level() + (ws[0].layout == Layout::kCpuPacked ? " packed" : ""));
}

void register_all() {
  // One thread is timed in CPU time (steady on a busy machine), several in real time.
  benchmark::RegisterBenchmark("StreamRead", StreamRead)->Arg(1)->Unit(benchmark::kMillisecond);
  if (bench_threads() > 1)
    benchmark::RegisterBenchmark("StreamRead", StreamRead)->Arg(bench_threads())->UseRealTime()->Unit(
        benchmark::kMillisecond);
  for (MatmulPrecision precision : {MatmulPrecision::kQ8, MatmulPrecision::kF32})
    for (const Shape& s : kShapes) {
      const std::string name = std::string("Matmul/") + (precision == MatmulPrecision::kQ8 ? "q8/" : "f32/") + s.name;
      auto* b = benchmark::RegisterBenchmark(name.c_str(), Matmul, s, precision);
      b->Arg(1)->Arg(2)->Arg(5)->Arg(8)->Arg(32);
      if (s.prefill) b->Arg(512);
      b->ArgName("batch")->Unit(benchmark::kMicrosecond);
      if (bench_threads() > 1) b->UseRealTime();
    }
}

}  // namespace
}  // namespace folio

int main(int argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--threads=", 0) == 0) {
      folio::g_threads = std::stoi(arg.substr(10));
    } else if (arg == "--no-pack") {
      folio::g_no_pack = true;
    } else if (arg.rfind("--level=", 0) == 0) {
      folio::g_level = arg.substr(8);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  folio::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
