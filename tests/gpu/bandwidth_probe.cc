// bandwidth_probe: the GPU's device-to-device copy rate, the memory ceiling
// decode speed is measured against (METHOD.md: bytes read plus bytes
// written, timed with events after a warm-up, the median of many copies of
// buffers several times the L2). Checks every CUDA call.
//
// Usage: bandwidth_probe [GiB per buffer, default 2]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "bandwidth_probe: %s failed: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
  const auto bytes = static_cast<std::size_t>(gib * (1 << 30));
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  void *a = nullptr, *b = nullptr;
  check(cudaMalloc(&a, bytes), "cudaMalloc");
  check(cudaMalloc(&b, bytes), "cudaMalloc");
  check(cudaMemset(a, 1, bytes), "cudaMemset");
  check(cudaMemset(b, 2, bytes), "cudaMemset");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) check(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice), "warm-up copy");
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    check(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice), "copy");
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double median_s = ms[ms.size() / 2] / 1e3;
  std::printf("bandwidth_probe: %s, %d SMs, %.0f MB L2; copy of %.2f GiB: median %.3f ms, %.2f TB/s read+write\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6, gib, median_s * 1e3,
              2.0 * static_cast<double>(bytes) / median_s / 1e12);
  cudaFree(a);
  cudaFree(b);
  return 0;
}
