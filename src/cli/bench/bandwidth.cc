#include "cli/bench/bandwidth.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "backend/buffer.h"
#include "cli/bench/report.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace folio::cli {
namespace {

// Sums 64-bit words so that no load can be skipped; four accumulators keep
// several cache lines in flight.
__attribute__((target("avx2"))) std::uint64_t sum_avx2(const std::byte* p, std::size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (std::size_t i = 0; i + 128 <= n; i += 128) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

std::uint64_t sum_plain(const std::byte* p, std::size_t n) {
  std::uint64_t s = 0;
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t v;
    std::memcpy(&v, p + i, 8);
    s += v;
  }
  return s;
}

}  // namespace

BandwidthResult measure_read_bandwidth(std::size_t bytes, int threads, int passes) {
  constexpr std::size_t kChunk = 1 << 20;  // work unit: 1 MiB, 128-byte aligned
  bytes = std::max(kChunk, bytes / kChunk * kChunk);
  Buffer buffer = host_buffer(bytes);
  std::memset(buffer.data(), 1, bytes);  // fault every page in before timing
  const auto* base = static_cast<const std::byte*>(buffer.data());
  const bool avx2 = __builtin_cpu_supports("avx2");
  ThreadPool pool(threads);
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(pool.size()));
  BandwidthResult r;
  r.bytes = bytes;
  r.threads = pool.size();
  const std::int64_t num_chunks = static_cast<std::int64_t>(bytes / kChunk);
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.run_chunks(num_chunks, [&](std::int64_t chunk, int thread) {
      const std::byte* p = base + static_cast<std::size_t>(chunk) * kChunk;
      sums[static_cast<std::size_t>(thread)] += avx2 ? sum_avx2(p, kChunk) : sum_plain(p, kChunk);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.gb_per_s.push_back(static_cast<double>(bytes) * 1e-9 / s);
  }
  std::uint64_t total = 0;
  for (std::uint64_t s : sums) total += s;
  // The sum is known (every byte is 1); checking it keeps the loads alive.
  FOLIO_CHECK(total == static_cast<std::uint64_t>(passes) * (bytes / 8) * 0x0101010101010101ull);
  r.median_gb_per_s = median(r.gb_per_s);
  r.max_gb_per_s = *std::max_element(r.gb_per_s.begin(), r.gb_per_s.end());
  return r;
}

}  // namespace folio::cli
