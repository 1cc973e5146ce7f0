// DType: the element formats of GGUF tensors, with the ids GGUF files use and
// the block geometry of each (elements per block, bytes per block).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace folio {

// Values are the on-disk type ids of GGUF (ggml_type); gaps are ids that the
// format has retired.
enum class DType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
};

struct DTypeInfo {
  DType type;
  std::string_view name;      // lower case, as users type it: "q4_k"
  std::int64_t block_elems;   // elements per block (1 for plain types)
  std::int64_t block_bytes;   // bytes per block
  bool dequantizable;         // folio has a reference dequantizer for it
};

// The info of a GGUF type id, or nullopt when the id is not a known type.
std::optional<DTypeInfo> dtype_info(std::uint32_t id);
const DTypeInfo& info(DType type);
inline std::string_view name(DType type) { return info(type).name; }

// Parses "q4_0", "Q4_0", "f16", ... ; nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name);

// f32, f16 or bf16: plain numbers, no blocks or scales.
inline bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Bytes of a row of n elements; n must be a multiple of the block size.
std::int64_t row_bytes(DType type, std::int64_t n);

}  // namespace folio
