#include "backend/cpu/packed_weights.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "tensor/quant_blocks.h"

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

void convert_block32_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k, bool to_packed) {
  Block32Fields f;
  FOLIO_CHECK(fields_of(type, f) && k % 32 == 0);
  const std::int64_t num_blocks = k / 32;
  for (std::int64_t b = 0; b < num_blocks; b += kPackedGroupBlocks) {
    const int count = static_cast<int>(std::min<std::int64_t>(kPackedGroupBlocks, num_blocks - b));
    move_group(f, count, src + b * f.bytes, dst + b * f.bytes, to_packed);
  }
}

// ---- K-quants ----

// How a code field of a super-block orders its elements in the file
// (quant_blocks.h); the packed orders are in packed_weights.h.
enum class FileOrder {
  kNibblePairs,   // Q4_K/Q5_K qs: element 64 a + 32 h + l in byte 32 a + l, nibble h
  kNibbleHalves,  // Q6_K ql: element 128 h + r in byte 64 h + r % 64, nibble r / 64
  kCrumbs,        // Q2_K/Q3_K qs, Q6_K qh: element 128 h + 32 i + l in byte 32 h + l, bits 2 i
  kBits,          // Q3_K hmask, Q5_K qh: element e in byte e % 32, bit e / 32
};

struct CodeField {
  std::size_t offset;  // in the super-block
  FileOrder order;
};

struct BitPos {
  int byte;
  int shift;
};

int bits_of(FileOrder o) {
  switch (o) {
    case FileOrder::kNibblePairs:
    case FileOrder::kNibbleHalves: return 4;
    case FileOrder::kCrumbs: return 2;
    case FileOrder::kBits: return 1;
  }
  return 0;
}

BitPos file_pos(FileOrder o, int e) {
  switch (o) {
    case FileOrder::kNibblePairs: return {32 * (e / 64) + e % 32, 4 * (e / 32 % 2)};
    case FileOrder::kNibbleHalves: return {64 * (e / 128) + e % 64, 4 * (e % 128 / 64)};
    case FileOrder::kCrumbs: return {32 * (e / 128) + e % 32, 2 * (e % 128 / 32)};
    case FileOrder::kBits: return {e % 32, e / 32};
  }
  return {0, 0};
}

BitPos packed_pos(int bits, int e) {
  const int j = e / 32, p = e % 32;
  switch (bits) {
    case 4: return {32 * (p % 16 / 4) + 4 * j + p % 4, 4 * (p / 16)};
    case 2: return {32 * (p / 16) + 4 * j + p % 4, 2 * (p % 16 / 4)};
    default: return {4 * j + p % 4, p / 4};
  }
}

// The code fields of a K-quant super-block (at most two), or none.
int kquant_fields(DType type, CodeField (&f)[2]) {
  switch (type) {
    case DType::Q2_K: f[0] = {offsetof(BlockQ2_K, qs), FileOrder::kCrumbs}; return 1;
    case DType::Q3_K:
      f[0] = {offsetof(BlockQ3_K, hmask), FileOrder::kBits};
      f[1] = {offsetof(BlockQ3_K, qs), FileOrder::kCrumbs};
      return 2;
    case DType::Q4_K: f[0] = {offsetof(BlockQ4_K, qs), FileOrder::kNibblePairs}; return 1;
    case DType::Q5_K:
      f[0] = {offsetof(BlockQ5_K, qh), FileOrder::kBits};
      f[1] = {offsetof(BlockQ5_K, qs), FileOrder::kNibblePairs};
      return 2;
    case DType::Q6_K:
      f[0] = {offsetof(BlockQ6_K, ql), FileOrder::kNibbleHalves};
      f[1] = {offsetof(BlockQ6_K, qh), FileOrder::kCrumbs};
      return 2;
    default: return 0;
  }
}

void convert_kquant_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k, bool to_packed) {
  CodeField fields[2];
  const int num_fields = kquant_fields(type, fields);
  FOLIO_CHECK(num_fields > 0 && k % kSuperBlockElems == 0);
  const auto block_bytes = static_cast<std::size_t>(info(type).block_bytes);
  for (std::int64_t b = 0; b < k / kSuperBlockElems; ++b) {
    const std::byte* from = src + b * block_bytes;
    std::byte* to = dst + b * block_bytes;
    std::memcpy(to, from, block_bytes);  // scales and the rest keep their places
    for (int fi = 0; fi < num_fields; ++fi) {
      const CodeField& f = fields[fi];
      const int bits = bits_of(f.order);
      const unsigned mask = (1u << bits) - 1;
      std::memset(to + f.offset, 0, static_cast<std::size_t>(kSuperBlockElems * bits / 8));
      for (int e = 0; e < kSuperBlockElems; ++e) {
        BitPos in = file_pos(f.order, e), out = packed_pos(bits, e);
        if (!to_packed) std::swap(in, out);
        const unsigned v = (std::to_integer<unsigned>(from[f.offset + in.byte]) >> in.shift) & mask;
        to[f.offset + out.byte] |= std::byte{static_cast<std::uint8_t>(v << out.shift)};
      }
    }
  }
}

void convert_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k, bool to_packed) {
  CodeField fields[2];
  if (kquant_fields(type, fields) > 0) return convert_kquant_row(type, src, dst, k, to_packed);
  convert_block32_row(type, src, dst, k, to_packed);
}

}  // namespace

bool is_packable(DType type) {
  Block32Fields f;
  CodeField k[2];
  return fields_of(type, f) || kquant_fields(type, k) > 0;
}

void pack_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k) { convert_row(type, src, dst, k, true); }

void unpack_row(DType type, const std::byte* src, std::byte* dst, std::int64_t k) {
  convert_row(type, src, dst, k, false);
}

}  // namespace folio
