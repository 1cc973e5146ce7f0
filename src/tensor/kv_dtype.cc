// Reference KV row conversion: plain loops, the yardstick of the backends'
// write_kv and attention kernels (which must decode to the same floats).
#include "tensor/kv_dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "tensor/fp8.h"
#include "tensor/half.h"

// Every multiply rounded on its own, as in the SIMD kernels.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace folio {
namespace {

constexpr int kQ8Block = 32;
constexpr float kF16Max = 65504.0f;

constexpr std::array kKvTypes = {
    KvDTypeInfo{KvDType::kF32, "f32", 32, 0},   KvDTypeInfo{KvDType::kF16, "f16", 16, 0},
    KvDTypeInfo{KvDType::kBF16, "bf16", 16, 0}, KvDTypeInfo{KvDType::kQ8_0, "q8_0", 8, kQ8Block},
    KvDTypeInfo{KvDType::kFp8E4M3, "fp8_e4m3", 8, -1},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The largest magnitude of n numbers; NaNs take no part.
float max_abs(const float* x, std::int64_t n) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  return amax;
}

// The f16 scale that maps `amax` to `top`, and its inverse (0 for a zero
// scale). The inverse is of the rounded scale, so codes and decoding agree.
struct Scale {
  std::uint16_t bits;
  float inverse;
};

Scale scale_for(float amax, float top) {
  const std::uint16_t bits = f32_to_f16(std::fmin(amax / top, kF16Max));
  const float d = f16_to_f32(bits);
  return {bits, d == 0.0f ? 0.0f : 1.0f / d};
}

// A finite value rounded to nearest even and clamped to [lo, hi]; NaN is 0.
int to_code(float v, int lo, int hi) {
  if (std::isnan(v)) return 0;
  return static_cast<int>(std::clamp(std::nearbyint(v), static_cast<float>(lo), static_cast<float>(hi)));
}

// GGUF's Q8_0 rule per block of 32: d = amax / 127, q = x / d. (GGUF rounds
// half away from zero with the inverse of the unrounded d; here ties go to
// even and the inverse is of the stored f16 d.)
void encode_q8(const float* x, std::int64_t n, std::int8_t* q, std::uint16_t* scales) {
  for (std::int64_t b = 0; b < n / kQ8Block; ++b) {
    const float* xb = x + b * kQ8Block;
    const Scale s = scale_for(max_abs(xb, kQ8Block), 127.0f);
    scales[b] = s.bits;
    for (int i = 0; i < kQ8Block; ++i)
      q[b * kQ8Block + i] = static_cast<std::int8_t>(to_code(xb[i] * s.inverse, -127, 127));
  }
}

void encode_fp8(const float* x, std::int64_t n, std::uint8_t* q, std::uint16_t* scale) {
  const Scale s = scale_for(max_abs(x, n), kFp8E4M3Max);
  *scale = s.bits;
  for (std::int64_t i = 0; i < n; ++i) q[i] = f32_to_fp8_e4m3(x[i] * s.inverse);
}

}  // namespace

const KvDTypeInfo& info(KvDType type) {
  for (const auto& t : kKvTypes)
    if (t.type == type) return t;
  fail("unknown KV cache type id {}", static_cast<int>(type));
}

std::optional<KvDType> parse_kv_dtype(std::string_view name) {
  const std::string n = lower(name);
  if (n == "fp8" || n == "fp8e4m3" || n == "f8_e4m3") return KvDType::kFp8E4M3;
  for (const auto& t : kKvTypes)
    if (t.name == n) return t.type;
  return std::nullopt;
}

std::vector<std::string> kv_dtype_names() {
  std::vector<std::string> out;
  for (const auto& t : kKvTypes) out.emplace_back(t.name);
  return out;
}

std::optional<std::string> kv_dim_problem(KvDType type, std::int64_t dim) {
  if (dim <= 0) return "a row must hold at least one number";
  if (type == KvDType::kQ8_0 && dim % kQ8Block != 0)
    return "q8_0 keeps one scale per block of 32 numbers, so the head size must be a multiple of 32";
  return std::nullopt;
}

std::int64_t kv_row_bytes(KvDType type, std::int64_t dim) { return dim * info(type).code_bits / 8; }

std::int64_t kv_row_scales(KvDType type, std::int64_t dim) {
  const int group = info(type).scale_group;
  if (group == 0) return 0;
  if (group < 0) return 1;
  return dim / group;
}

void encode_kv_row(KvDType type, const float* x, std::int64_t n, void* codes, std::uint16_t* scales) {
  if (auto problem = kv_dim_problem(type, n))
    fail("cannot store a row of {} numbers as {}: {}", n, name(type), *problem);
  switch (type) {
    case KvDType::kF32: std::memcpy(codes, x, static_cast<std::size_t>(n) * sizeof(float)); break;
    case KvDType::kF16:
      for (std::int64_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(codes)[i] = f32_to_f16(x[i]);
      break;
    case KvDType::kBF16:
      for (std::int64_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(codes)[i] = f32_to_bf16(x[i]);
      break;
    case KvDType::kQ8_0: encode_q8(x, n, static_cast<std::int8_t*>(codes), scales); break;
    case KvDType::kFp8E4M3: encode_fp8(x, n, static_cast<std::uint8_t*>(codes), scales); break;
  }
}

void decode_kv_row(KvDType type, const void* codes, const std::uint16_t* scales, std::int64_t n, float* out) {
  switch (type) {
    case KvDType::kF32: std::memcpy(out, codes, static_cast<std::size_t>(n) * sizeof(float)); break;
    case KvDType::kF16:
      for (std::int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(static_cast<const std::uint16_t*>(codes)[i]);
      break;
    case KvDType::kBF16:
      for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(static_cast<const std::uint16_t*>(codes)[i]);
      break;
    case KvDType::kQ8_0: {
      const auto* q = static_cast<const std::int8_t*>(codes);
      for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * f16_to_f32(scales[i / kQ8Block]);
      break;
    }
    case KvDType::kFp8E4M3: {
      const float d = f16_to_f32(scales[0]);
      for (std::int64_t i = 0; i < n; ++i) out[i] = fp8_e4m3_to_f32(static_cast<const std::uint8_t*>(codes)[i]) * d;
      break;
    }
  }
}

KvCacheDType::KvCacheDType(DType both) {
  switch (both) {
    case DType::F32: k = v = KvDType::kF32; break;
    case DType::F16: k = v = KvDType::kF16; break;
    case DType::BF16: k = v = KvDType::kBF16; break;
    case DType::Q8_0: k = v = KvDType::kQ8_0; break;
    default: fail("{} is not a KV cache type; use one of f32, f16, bf16, q8_0, fp8_e4m3", folio::name(both));
  }
}

std::string KvCacheDType::name() const {
  if (k == v) return std::string(folio::name(k));
  return std::string(folio::name(k)) + ":" + std::string(folio::name(v));
}

std::optional<KvCacheDType> parse_kv_cache_dtype(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    auto both = parse_kv_dtype(text);
    if (!both) return std::nullopt;
    return KvCacheDType(*both);
  }
  auto k = parse_kv_dtype(text.substr(0, colon));
  auto v = parse_kv_dtype(text.substr(colon + 1));
  if (!k || !v) return std::nullopt;
  return KvCacheDType(*k, *v);
}

KvCacheDType kv_cache_dtype_from_flag(std::string_view text) {
  if (auto t = parse_kv_cache_dtype(text)) return *t;
  std::string names;
  for (const auto& n : kv_dtype_names()) names += (names.empty() ? "" : ", ") + n;
  fail("unknown KV cache type \"{}\"; use one of {}, or K:V such as q8_0:f16 for keys and values apart", text, names);
}

}  // namespace folio
