// KvDType: the number formats of the paged KV cache, and the reference
// conversion of one cache row (one token's key or value of one KV head)
// between floats and a format. Scaled formats keep int8 or fp8 codes in the
// row and f16 scales beside it (layout in backend/kv_pool.h); a row is encoded
// once, from its own numbers only, so a token's cache bytes never depend on
// the other tokens of a batch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace folio {

enum class KvDType : std::uint8_t {
  kF32,      // 4 bytes a number
  kF16,      // IEEE binary16
  kBF16,     // bfloat16
  kQ8_0,     // GGUF's Q8_0 per block of 32 numbers along the row: int8 codes q in
             // [-127, 127] and one f16 d, x = d * q; 34 bytes per 32 numbers
  kFp8E4M3,  // OCP E4M3 codes and one f16 d per row (token, KV head), x = d * e4m3(q);
             // the row's largest magnitude maps to 448; dim + 2 bytes a row
};

struct KvDTypeInfo {
  KvDType type;
  std::string_view name;  // as users type it: "q8_0"
  int code_bits;          // bits of one number's code
  int scale_group;        // numbers per f16 scale: 0 unscaled, -1 one per row, else a block size
};

const KvDTypeInfo& info(KvDType type);
inline std::string_view name(KvDType type) { return info(type).name; }
inline bool is_scaled(KvDType type) { return info(type).scale_group != 0; }
// "f32", "f16", "bf16", "q8_0", "fp8_e4m3" (or "fp8"); any case.
std::optional<KvDType> parse_kv_dtype(std::string_view name);
std::vector<std::string> kv_dtype_names();

// Whether rows of `dim` numbers can be stored in `type`; the reason if not.
std::optional<std::string> kv_dim_problem(KvDType type, std::int64_t dim);
// Bytes of a row's codes, the number of f16 scales beside it, and the two
// together: every byte a row of `dim` numbers takes in the cache.
std::int64_t kv_row_bytes(KvDType type, std::int64_t dim);
std::int64_t kv_row_scales(KvDType type, std::int64_t dim);
inline std::int64_t kv_row_total_bytes(KvDType type, std::int64_t dim) {
  return kv_row_bytes(type, dim) + 2 * kv_row_scales(type, dim);
}

// Encodes n floats into a row's codes (kv_row_bytes) and scales
// (kv_row_scales f16 bit patterns; none for unscaled types).
void encode_kv_row(KvDType type, const float* x, std::int64_t n, void* codes, std::uint16_t* scales);
// Decodes a row back to n floats: each number is code * scale, one rounding.
void decode_kv_row(KvDType type, const void* codes, const std::uint16_t* scales, std::int64_t n, float* out);

// The types of the K and the V cache, chosen separately. Converts from a
// GGUF DType (f32, f16, bf16, q8_0 for both) so that call sites that name a
// DType keep working; the conversion throws for any other DType.
struct KvCacheDType {
  KvDType k = KvDType::kF16;
  KvDType v = KvDType::kF16;

  KvCacheDType() = default;
  KvCacheDType(KvDType both) : k(both), v(both) {}  // NOLINT: implicit on purpose
  KvCacheDType(KvDType k_type, KvDType v_type) : k(k_type), v(v_type) {}
  KvCacheDType(DType both);  // NOLINT: implicit on purpose
  bool operator==(const KvCacheDType&) const = default;

  // "q8_0" when K and V agree, else "q8_0:f16" (K first).
  std::string name() const;
};

// "q8_0" (both) or "K:V" such as "q8_0:f16"; nullopt when either is unknown.
std::optional<KvCacheDType> parse_kv_cache_dtype(std::string_view text);
// As parse_kv_cache_dtype, but throws an Error that lists the choices.
KvCacheDType kv_cache_dtype_from_flag(std::string_view text);

// The help text of the --kv-cache-dtype flags.
inline constexpr const char* kKvCacheDTypeHelp =
    "KV cache type: f16 (default), bf16, f32, q8_0 or fp8_e4m3; K:V (e.g. q8_0:f16) sets keys and values apart";

}  // namespace folio
