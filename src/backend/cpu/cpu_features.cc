#include "backend/cpu/cpu_features.h"


namespace folio {

CpuFeatures CpuFeatures::detect(std::string_view cap) {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  if (cap == "avx512") f.avx512_vnni = false;
  if (cap == "avx2" || cap == "scalar") f.avx512 = f.avx512_vnni = f.avx512_bf16 = false;
  if (cap == "scalar") f.avx2 = false;
  return f;
}

std::string CpuFeatures::level() const {
  if (avx512_vnni) return "avx512-vnni";
  if (avx512) return "avx512";
  if (avx2) return "avx2";
  return "scalar";
}

}  // namespace folio
