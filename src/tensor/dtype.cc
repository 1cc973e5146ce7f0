#include "tensor/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "core/error.h"

namespace folio {
namespace {

constexpr std::array kTypes = {
    DTypeInfo{DType::F32, "f32", 1, 4, true},
    DTypeInfo{DType::F16, "f16", 1, 2, true},
    DTypeInfo{DType::Q4_0, "q4_0", 32, 18, true},
    DTypeInfo{DType::Q4_1, "q4_1", 32, 20, true},
    DTypeInfo{DType::Q5_0, "q5_0", 32, 22, true},
    DTypeInfo{DType::Q5_1, "q5_1", 32, 24, true},
    DTypeInfo{DType::Q8_0, "q8_0", 32, 34, true},
    DTypeInfo{DType::Q8_1, "q8_1", 32, 36, false},
    DTypeInfo{DType::Q2_K, "q2_k", 256, 84, true},
    DTypeInfo{DType::Q3_K, "q3_k", 256, 110, true},
    DTypeInfo{DType::Q4_K, "q4_k", 256, 144, true},
    DTypeInfo{DType::Q5_K, "q5_k", 256, 176, true},
    DTypeInfo{DType::Q6_K, "q6_k", 256, 210, true},
    DTypeInfo{DType::Q8_K, "q8_k", 256, 292, true},
    DTypeInfo{DType::IQ2_XXS, "iq2_xxs", 256, 66, false},
    DTypeInfo{DType::IQ2_XS, "iq2_xs", 256, 74, false},
    DTypeInfo{DType::IQ3_XXS, "iq3_xxs", 256, 98, false},
    DTypeInfo{DType::IQ1_S, "iq1_s", 256, 50, false},
    DTypeInfo{DType::IQ4_NL, "iq4_nl", 32, 18, true},
    DTypeInfo{DType::IQ3_S, "iq3_s", 256, 110, false},
    DTypeInfo{DType::IQ2_S, "iq2_s", 256, 82, false},
    DTypeInfo{DType::IQ4_XS, "iq4_xs", 256, 136, true},
    DTypeInfo{DType::I8, "i8", 1, 1, false},
    DTypeInfo{DType::I16, "i16", 1, 2, false},
    DTypeInfo{DType::I32, "i32", 1, 4, false},
    DTypeInfo{DType::I64, "i64", 1, 8, false},
    DTypeInfo{DType::F64, "f64", 1, 8, false},
    DTypeInfo{DType::IQ1_M, "iq1_m", 256, 56, false},
    DTypeInfo{DType::BF16, "bf16", 1, 2, true},
    DTypeInfo{DType::TQ1_0, "tq1_0", 256, 54, false},
    DTypeInfo{DType::TQ2_0, "tq2_0", 256, 66, false},
    DTypeInfo{DType::MXFP4, "mxfp4", 32, 17, true},
    DTypeInfo{DType::NVFP4, "nvfp4", 64, 36, true},
};

}  // namespace

std::optional<DTypeInfo> dtype_info(std::uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<std::uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

const DTypeInfo& info(DType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t;
  fail("unknown dtype id {}", static_cast<std::uint32_t>(type));
}

std::optional<DType> parse_dtype(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& t : kTypes)
    if (t.name == lower) return t.type;
  return std::nullopt;
}

std::int64_t row_bytes(DType type, std::int64_t n) {
  const auto& t = info(type);
  if (n % t.block_elems != 0)
    fail("a row of {} elements is not a whole number of {} blocks of {}", n, t.name, t.block_elems);
  return n / t.block_elems * t.block_bytes;
}

}  // namespace folio
