#include "backend/cpu/packed_weights.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace folio {
namespace {

// Where the fields of one block of a format lie.
struct Block32Fields {
  int bytes = 0;           // per block
  int halves = 0;          // binary16 fields at the start: d (and m)
  bool high_bits = false;  // a 4-byte qh after them (Q5)
  int code_bytes = 0;      // after those: 16 nibble bytes, or 32 int8 codes
};

bool fields_of(DType type, Block32Fields& f) {
  switch (type) {
    case DType::Q4_0: f = {18, 1, false, 16}; return true;
    case DType::Q4_1: f = {20, 2, false, 16}; return true;
    case DType::Q5_0: f = {22, 1, true, 16}; return true;
    case DType::Q5_1: f = {24, 2, true, 16}; return true;
    case DType::Q8_0: f = {34, 1, false, 32}; return true;
    default: return false;
  }
}

// Bits 0, 4, 8, .., 28 of w as bits 0 .. 7.
std::uint8_t every_fourth_bit(std::uint32_t w) {
  w &= 0x11111111u;
  w = (w | w >> 3) & 0x03030303u;   // pairs at bits 0-1, 8-9, 16-17, 24-25
  w = (w | w >> 6) & 0x000f000fu;   // nibbles at bits 0-3, 16-19
  return static_cast<std::uint8_t>(w | w >> 12);
}

// Moves the bytes of one group of `count` blocks between the file's order
// and the packed one; to_packed picks the direction.
void move_group(const Block32Fields& f, int count, const std::byte* src, std::byte* dst, bool to_packed) {
  auto move = [&](std::ptrdiff_t plain_off, std::ptrdiff_t packed_off, std::size_t n) {
    if (to_packed) {
      std::memcpy(dst + packed_off, src + plain_off, n);
    } else {
      std::memcpy(dst + plain_off, src + packed_off, n);
    }
  };
  const std::ptrdiff_t vector_bytes = 4 * count;  // one code vector: 4 bytes per block
  const std::ptrdiff_t qh_packed = 2 * count * f.halves;
  const std::ptrdiff_t codes_packed = qh_packed + (f.high_bits ? vector_bytes : 0);
  for (int j = 0; j < count; ++j) {
    const std::ptrdiff_t block = static_cast<std::ptrdiff_t>(j) * f.bytes;
    for (int h = 0; h < f.halves; ++h) move(block + 2 * h, 2 * count * h + 2 * j, 2);
    const std::ptrdiff_t codes_plain = block + 2 * f.halves + (f.high_bits ? 4 : 0);
    for (int v = 0; v < f.code_bytes / 4; ++v) move(codes_plain + 4 * v, codes_packed + vector_bytes * v + 4 * j, 4);
    if (!f.high_bits) continue;
    // qh: the bit of element 4 i + c of block j is bit i of byte 4 j + c.
    std::uint32_t bits = 0;
    if (to_packed) {
      std::memcpy(&bits, src + block + 2 * f.halves, 4);
      for (int c = 0; c < 4; ++c) dst[qh_packed + 4 * j + c] = std::byte{every_fourth_bit(bits >> c)};
    } else {
      for (int c = 0; c < 4; ++c)
        for (int i = 0; i < 8; ++i)
          bits |= static_cast<std::uint32_t>((std::to_integer<unsigned>(src[qh_packed + 4 * j + c]) >> i) & 1u)
                  << (4 * i + c);
      std::memcpy(dst + block + 2 * f.halves, &bits, 4);
    }
  }
}

void convert_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k, bool to_packed) {
  Block32Fields f;
  FOLIO_CHECK(fields_of(type, f) && k % 32 == 0);
  const std::int64_t num_blocks = k / 32;
  for (std::int64_t b = 0; b < num_blocks; b += kPackedGroupBlocks) {
    const int count = static_cast<int>(std::min<std::int64_t>(kPackedGroupBlocks, num_blocks - b));
    move_group(f, count, src + b * f.bytes, dst + b * f.bytes, to_packed);
  }
}

}  // namespace

bool is_packable(DType type) {
  Block32Fields f;
  return fields_of(type, f);
}

void pack_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k) { convert_row(type, src, dst, k, true); }

void unpack_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k) {
  convert_row(type, src, dst, k, false);
}

}  // namespace folio
