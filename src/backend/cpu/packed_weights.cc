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

// Calls move(j, offset in block j, offset in the group, bytes) for every run
// of bytes of a packed group (block b of the 8 rows of a panel, row j's block
// in lane j) but qh, which is converted bit by bit.
template <class Move>
void for_each_run(const Block32Fields& f, Move move) {
  const std::ptrdiff_t codes_packed = 16 * f.halves + (f.high_bits ? 32 : 0);
  const std::ptrdiff_t codes_plain = 2 * f.halves + (f.high_bits ? 4 : 0);
  for (int j = 0; j < kPanelRows; ++j) {
    for (int h = 0; h < f.halves; ++h) move(j, 2 * h, 16 * h + 2 * j, 2);
    for (int v = 0; v < f.code_bytes / 4; ++v) move(j, codes_plain + 4 * v, codes_packed + 32 * v + 4 * j, 4);
  }
}

// Where a group's qh lies: after its binary16 fields.
std::ptrdiff_t qh_of(const Block32Fields& f) { return 16 * f.halves; }

// `rows` rows (row j at src + j * stride) -> one panel of 8 (packed_weights.h).
void pack_block32_panel(const Block32Fields& f, const std::byte* src, std::size_t stride, int rows, std::byte* dst,
                        std::int64_t k) {
  const std::int64_t group_bytes = kPanelRows * f.bytes;
  std::memset(dst, 0, static_cast<std::size_t>(k / 32 * group_bytes));
  for (std::int64_t b = 0; b < k / 32; ++b) {
    std::byte* group = dst + b * group_bytes;
    auto block = [&](int j) { return src + j * stride + b * f.bytes; };
    for_each_run(f, [&](int j, std::ptrdiff_t plain, std::ptrdiff_t packed, std::size_t n) {
      if (j < rows) std::memcpy(group + packed, block(j) + plain, n);
    });
    if (!f.high_bits) continue;
    // qh: the bit of element 4 i + c of row j is bit i of byte 4 j + c.
    for (int j = 0; j < rows; ++j) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, block(j) + 2 * f.halves, 4);
      for (int c = 0; c < 4; ++c) group[qh_of(f) + 4 * j + c] = std::byte{every_fourth_bit(bits >> c)};
    }
  }
}

// Row `lane` of a panel back to the file's order.
void unpack_block32_row(const Block32Fields& f, const std::byte* panel, int lane, std::byte* dst, std::int64_t k) {
  const std::int64_t group_bytes = kPanelRows * f.bytes;
  for (std::int64_t b = 0; b < k / 32; ++b) {
    const std::byte* group = panel + b * group_bytes;
    std::byte* block = dst + b * f.bytes;
    for_each_run(f, [&](int j, std::ptrdiff_t plain, std::ptrdiff_t packed, std::size_t n) {
      if (j == lane) std::memcpy(block + plain, group + packed, n);
    });
    if (!f.high_bits) continue;
    std::uint32_t bits = 0;
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 8; ++i)
        bits |= static_cast<std::uint32_t>((std::to_integer<unsigned>(group[qh_of(f) + 4 * lane + c]) >> i) & 1u)
                << (4 * i + c);
    std::memcpy(block + 2 * f.halves, &bits, 4);
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

}  // namespace

bool is_packable(DType type) {
  Block32Fields f;
  CodeField k[2];
  return fields_of(type, f) || kquant_fields(type, k) > 0;
}

int packed_panel_rows(DType type) {
  Block32Fields f;
  return fields_of(type, f) ? kPanelRows : 1;
}

void pack_panel(DType type, const std::byte* src, std::size_t stride, int rows, std::byte* dst, std::int64_t k) {
  Block32Fields f;
  if (fields_of(type, f)) {
    FOLIO_CHECK(k % 32 == 0 && rows >= 1 && rows <= kPanelRows);
    return pack_block32_panel(f, src, stride, rows, dst, k);
  }
  FOLIO_CHECK(rows == 1);
  convert_kquant_row(type, src, dst, k, true);
}

void unpack_row(DType type, const std::byte* panel, int lane, std::byte* dst, std::int64_t k) {
  Block32Fields f;
  if (fields_of(type, f)) {
    FOLIO_CHECK(k % 32 == 0 && lane >= 0 && lane < kPanelRows);
    return unpack_block32_row(f, panel, lane, dst, k);
  }
  FOLIO_CHECK(lane == 0);
  convert_kquant_row(type, panel, dst, k, false);
}

}  // namespace folio
