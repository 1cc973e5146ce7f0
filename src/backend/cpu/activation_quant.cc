#include "backend/cpu/activation_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace folio {
namespace {

// Where element i of a row of k lies among the codes of `format`.
std::int64_t code_index(ActFormat format, std::int64_t i) {
  if (format != ActFormat::kQ8x256Packed) return i;
  const std::int64_t group = i / 256 * 256, chunk = i % 256 / 32, e = i % 32;
  return group + 32 * (e / 4) + 4 * chunk + e % 4;
}

}  // namespace

ActQ8Layout ActQ8Layout::make(ActFormat format, std::int64_t k) {
  FOLIO_CHECK(format != ActFormat::kF32);
  ActQ8Layout l;
  l.format = format;
  l.k = k;
  const bool k256 = format == ActFormat::kQ8x256 || format == ActFormat::kQ8x256Packed;
  l.block_elems = k256 ? 256 : 32;
  FOLIO_CHECK(k >= 0 && k % l.block_elems == 0);
  const auto num_blocks = static_cast<std::size_t>(k / l.block_elems);
  l.d_offset = static_cast<std::size_t>(k);
  l.sums_offset = l.d_offset + num_blocks * sizeof(float);
  const std::size_t sums_bytes =
      k256 ? static_cast<std::size_t>(k / 16) * sizeof(std::int16_t) : num_blocks * sizeof(std::int32_t);
  l.dsums_offset = l.sums_offset + sums_bytes;
  const std::size_t dsums_bytes = format == ActFormat::kQ8x256Packed ? static_cast<std::size_t>(k / 32) * sizeof(float) : 0;
  l.row_bytes = (l.dsums_offset + dsums_bytes + 63) / 64 * 64;
  return l;
}

void quantize_activation_reference(const ActQ8Layout& layout, const float* x, std::byte* row) {
  auto* qs = reinterpret_cast<std::int8_t*>(row);
  const std::int64_t be = layout.block_elems;
  for (std::int64_t b = 0; b < layout.k / be; ++b) {
    const float* xb = x + b * be;
    float amax = 0.0f;
    for (std::int64_t i = 0; i < be; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    float d = amax / 127.0f;
    float id = 127.0f / amax;
    if (!std::isfinite(id)) d = id = 0.0f;
    int sum = 0;
    for (std::int64_t i = 0; i < be; ++i) {
      const int q = static_cast<int>(std::nearbyint(xb[i] * id));
      qs[code_index(layout.format, b * be + i)] = static_cast<std::int8_t>(q);
      sum += q;
    }
    std::memcpy(row + layout.d_offset + b * sizeof(float), &d, sizeof(float));
    if (layout.block_elems == 32) {
      const std::int32_t s = sum;
      std::memcpy(row + layout.sums_offset + b * sizeof(s), &s, sizeof(s));
    } else {
      for (int g = 0; g < 16; ++g) {
        int group = 0;
        for (int i = 0; i < 16; ++i) group += qs[code_index(layout.format, b * be + 16 * g + i)];
        const auto g16 = static_cast<std::int16_t>(group);
        std::memcpy(row + layout.sums_offset + (b * 16 + g) * sizeof(std::int16_t), &g16, sizeof(g16));
      }
      if (layout.format == ActFormat::kQ8x256Packed)
        for (int c = 0; c < 8; ++c) {
          int chunk = 0;
          for (int i = 0; i < 32; ++i) chunk += qs[code_index(layout.format, b * be + 32 * c + i)];
          const float ds = d * static_cast<float>(chunk);
          std::memcpy(row + layout.dsums_offset + (b * 8 + c) * sizeof(float), &ds, sizeof(ds));
        }
    }
  }
}

float quantized_activation_value(const ActQ8Layout& layout, const std::byte* row, std::int64_t i) {
  float d;
  std::memcpy(&d, row + layout.d_offset + (i / layout.block_elems) * sizeof(float), sizeof(float));
  return d * static_cast<float>(reinterpret_cast<const std::int8_t*>(row)[code_index(layout.format, i)]);
}

}  // namespace folio
