// CpuFeatures: what the processor offers, read once at start-up; kernels are
// chosen from it once, and below that choice every call is direct.
#pragma once

#include <string>
#include <string_view>

namespace folio {

struct CpuFeatures {
  bool avx2 = false;      // with FMA and F16C: the baseline SIMD level
  bool avx512 = false;    // F, BW, VL, DQ
  bool avx512_vnni = false;
  bool avx512_bf16 = false;

  // What this processor has, capped at `cap` ("avx512", "avx2", "scalar";
  // empty: no cap) so that every kernel level can be tested on one machine.
  static CpuFeatures detect(std::string_view cap = {});
  // "avx512-vnni", "avx512", "avx2" or "scalar".
  std::string level() const;
};

}  // namespace folio
