// measure_read_bandwidth: this machine's memory bandwidth for a plain
// streaming read on a given number of threads - the bound a memory-bound
// decode step can reach, for the roofline figures of `folio bench`.
#pragma once

#include <cstddef>
#include <vector>

namespace folio::cli {

struct BandwidthResult {
  std::vector<double> gb_per_s;  // one per pass
  double median_gb_per_s = 0;
  double max_gb_per_s = 0;
  std::size_t bytes = 0;         // read per pass
  int threads = 0;
};

// Reads a buffer of `bytes` (far beyond the caches) `passes` times, each
// pass split among `threads` threads.
BandwidthResult measure_read_bandwidth(std::size_t bytes, int threads, int passes);

}  // namespace folio::cli
