#include "backend/cpu/packed_weights.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

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

int bits_of(FileOrder o) {
  switch (o) {
    case FileOrder::kNibblePairs:
    case FileOrder::kNibbleHalves: return 4;
    case FileOrder::kCrumbs: return 2;
    case FileOrder::kBits: return 1;
  }
  return 0;
}

// A field's bits of each element, one byte per element in element order:
// the meeting point of the two layouts. Each converter below walks runs of
// contiguous bytes, so that packing a model takes a fraction of its load.
using Elements = std::uint8_t[kSuperBlockElems];

void file_to_elements(FileOrder o, const std::uint8_t* f, Elements& e) {
  switch (o) {
    case FileOrder::kNibblePairs:
      for (int a = 0; a < 4; ++a)
        for (int l = 0; l < 32; ++l) {
          e[64 * a + l] = f[32 * a + l] & 15;
          e[64 * a + 32 + l] = f[32 * a + l] >> 4;
        }
      return;
    case FileOrder::kNibbleHalves:
      for (int h = 0; h < 2; ++h)
        for (int r = 0; r < 64; ++r) {
          e[128 * h + r] = f[64 * h + r] & 15;
          e[128 * h + 64 + r] = f[64 * h + r] >> 4;
        }
      return;
    case FileOrder::kCrumbs:
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 4; ++i)
          for (int l = 0; l < 32; ++l) e[128 * h + 32 * i + l] = (f[32 * h + l] >> (2 * i)) & 3;
      return;
    case FileOrder::kBits:
      for (int i = 0; i < 8; ++i)
        for (int l = 0; l < 32; ++l) e[32 * i + l] = (f[l] >> i) & 1;
      return;
  }
}

void elements_to_file(FileOrder o, const Elements& e, std::uint8_t* f) {
  switch (o) {
    case FileOrder::kNibblePairs:
      for (int a = 0; a < 4; ++a)
        for (int l = 0; l < 32; ++l) f[32 * a + l] = static_cast<std::uint8_t>(e[64 * a + l] | e[64 * a + 32 + l] << 4);
      return;
    case FileOrder::kNibbleHalves:
      for (int h = 0; h < 2; ++h)
        for (int r = 0; r < 64; ++r) f[64 * h + r] = static_cast<std::uint8_t>(e[128 * h + r] | e[128 * h + 64 + r] << 4);
      return;
    case FileOrder::kCrumbs:
      for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
          unsigned v = 0;
          for (int i = 0; i < 4; ++i) v |= static_cast<unsigned>(e[128 * h + 32 * i + l]) << (2 * i);
          f[32 * h + l] = static_cast<std::uint8_t>(v);
        }
      return;
    case FileOrder::kBits:
      for (int l = 0; l < 32; ++l) {
        unsigned v = 0;
        for (int i = 0; i < 8; ++i) v |= static_cast<unsigned>(e[32 * i + l]) << i;
        f[l] = static_cast<std::uint8_t>(v);
      }
      return;
  }
}

// The packed orders of packed_weights.h, by bits per element; element
// 32 j + p, and c = p % 4 the byte within each run of 4.
void packed_to_elements(int bits, const std::uint8_t* q, Elements& e) {
  for (int j = 0; j < 8; ++j)
    for (int c = 0; c < 4; ++c) {
      std::uint8_t* chunk = e + 32 * j + c;
      if (bits == 4) {
        for (int v = 0; v < 4; ++v) {
          chunk[4 * v] = q[32 * v + 4 * j + c] & 15;
          chunk[16 + 4 * v] = q[32 * v + 4 * j + c] >> 4;
        }
      } else if (bits == 2) {
        for (int s = 0; s < 2; ++s)
          for (int u = 0; u < 4; ++u) chunk[16 * s + 4 * u] = (q[32 * s + 4 * j + c] >> (2 * u)) & 3;
      } else {
        for (int u = 0; u < 8; ++u) chunk[4 * u] = (q[4 * j + c] >> u) & 1;
      }
    }
}

void elements_to_packed(int bits, const Elements& e, std::uint8_t* q) {
  for (int j = 0; j < 8; ++j)
    for (int c = 0; c < 4; ++c) {
      const std::uint8_t* chunk = e + 32 * j + c;
      if (bits == 4) {
        for (int v = 0; v < 4; ++v) q[32 * v + 4 * j + c] = static_cast<std::uint8_t>(chunk[4 * v] | chunk[16 + 4 * v] << 4);
      } else if (bits == 2) {
        for (int s = 0; s < 2; ++s) {
          unsigned v = 0;
          for (int u = 0; u < 4; ++u) v |= static_cast<unsigned>(chunk[16 * s + 4 * u]) << (2 * u);
          q[32 * s + 4 * j + c] = static_cast<std::uint8_t>(v);
        }
      } else {
        unsigned v = 0;
        for (int u = 0; u < 8; ++u) v |= static_cast<unsigned>(chunk[4 * u]) << u;
        q[4 * j + c] = static_cast<std::uint8_t>(v);
      }
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
  Elements e;
  for (std::int64_t b = 0; b < k / kSuperBlockElems; ++b) {
    const auto* from = reinterpret_cast<const std::uint8_t*>(src + b * block_bytes);
    auto* to = reinterpret_cast<std::uint8_t*>(dst + b * block_bytes);
    std::memcpy(to, from, block_bytes);  // scales and the rest keep their places
    for (int fi = 0; fi < num_fields; ++fi) {
      const CodeField& f = fields[fi];
      if (to_packed) {
        file_to_elements(f.order, from + f.offset, e);
        elements_to_packed(bits_of(f.order), e, to + f.offset);
      } else {
        packed_to_elements(bits_of(f.order), from + f.offset, e);
        elements_to_file(f.order, e, to + f.offset);
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
